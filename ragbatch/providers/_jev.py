"""The live Jev provider: ``POST {base}/v1/systemone`` through the project's one retrying
HTTP client (:mod:`ragbatch.providers._http_client`, async I/O).

Per call: rate limiter slot -> per-attempt timeout -> retries around the HTTP call only.
Retried: 408, 429, every 5xx (529 included), a 200 whose body is not JSON (a proxy's page, a
cut reply), connection errors and timeouts, with exponential backoff and jitter, capped;
``retry-after-ms`` / ``Retry-After`` (seconds or an HTTP-date, up to ``retry_after_cap_s``)
is honoured on every retried status, 503 as much as 429. Never retried: 400, 401, 403, 404,
422, JSON replies that fail the schema (``malformed-response``) and replies over the body
cap (``response-too-large``). A 401 or 403 stops the whole run (a wrong key would fail every
row). ``--timeout`` bounds each attempt as a whole (a reply trickling in fails at it); the
overall per-row deadline bounds all attempts and waits together. The API key is trimmed and
checked before the first request, and never appears in an error message in any spelling. A
request over the documented size limits is not sent: its row fails with kind
``request-too-large``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace

from ragbatch.core import (
    TOO_LARGE_KIND,
    AttemptMeter,
    Call,
    ProviderError,
    Reply,
    RequestLimits,
    TokenUsage,
    estimate_input_tokens,
    oversize_reason,
    parse_reply,
)
from ragbatch.providers._apikey import Redactor, check_base_url, clean_key, masked_reply
from ragbatch.providers._http_client import (
    DEFAULT_MAX_RESPONSE_BYTES,
    RETRY_STATUSES,
    THROTTLE_STATUSES,
    Outcome,
    Policy,
    RetryingClient,
    Service,
)
from ragbatch.providers._ratelimit import RateLimiter
from ragbatch.providers._replies import HttpReply, error_message, is_json, parse_retry_after

__all__ = [
    "DEFAULT_BASE_URL",
    "DEFAULT_MODEL",
    "ENDPOINT",
    "MODEL_ALIASES",
    "NON_JSON_KIND",
    "RETRY_STATUSES",
    "THROTTLE_STATUSES",
    "JevProvider",
    "JevSettings",
    "OfflineJev",
    "error_message",
    "is_json",
    "parse_retry_after",
]

DEFAULT_BASE_URL = "https://api.typesafe.ai"
DEFAULT_MODEL = "jev-latest"
ENDPOINT = "/v1/systemone"
MODEL_ALIASES = frozenset({"jev-latest", "jev-preview"})
KEY_SOURCE = "TYPESAFE_API_KEY or --api-key"
NON_JSON_KIND = "non-json-response"  # a 200 whose body is not JSON: retried like a 5xx
JEV = Service("the Jev API", "TYPESAFE_API_KEY", "x-typesafe-request-id", "--base-url")


@dataclass(frozen=True)
class JevSettings:
    """Connection and retry settings (defaults follow the official SDK)."""

    api_key: str | None
    base_url: str = DEFAULT_BASE_URL
    model: str = DEFAULT_MODEL
    attempt_timeout_s: float = 30.0
    row_deadline_s: float = 300.0
    max_retries: int = 4
    backoff_initial_s: float = 0.5
    backoff_max_s: float = 5.0
    retry_after_cap_s: float = 60.0
    limits: RequestLimits = field(default_factory=RequestLimits)  # over one: never sent
    allow_insecure_http: bool = False  # send the key over http:// to a non-loopback host
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES  # decoded; over it: response-too-large
    tls_verify: bool | str = True  # system CAs, no check (False) or a CA bundle's path
    keep_alive: bool = True  # False: a connection per request (see providers._http_conn)

    def __repr__(self) -> str:  # never show the key
        return f"JevSettings(base_url={self.base_url!r}, model={self.model!r}, api_key=***)"

    def policy(self) -> Policy:
        """The HTTP client's timeouts, retries and limits."""
        return Policy(
            attempt_timeout_s=self.attempt_timeout_s,
            row_deadline_s=self.row_deadline_s,
            max_retries=self.max_retries,
            backoff_initial_s=self.backoff_initial_s,
            backoff_max_s=self.backoff_max_s,
            retry_after_cap_s=self.retry_after_cap_s,
            max_response_bytes=self.max_response_bytes,
            verify=self.tls_verify,
            keep_alive=self.keep_alive,
        )


class JevProvider:
    """Provider protocol over the real Jev API."""

    name = "jev"
    endpoint = ENDPOINT

    def __init__(self, settings: JevSettings, limiter: RateLimiter) -> None:
        # the key as given, for the redactor; trimmed and checked (RunAborted) before any use
        self.redact = Redactor(settings.api_key)
        settings = replace(settings, api_key=clean_key(settings.api_key, KEY_SOURCE))
        check_base_url(
            settings.base_url, "--base-url", allow_insecure_http=settings.allow_insecure_http
        )
        self.settings = settings
        self.model = settings.model
        self.limiter = limiter
        key = settings.api_key or ""
        self.client = RetryingClient(
            settings.base_url, key, limiter, settings.policy(), JEV, self.redact
        )
        self.meter: AttemptMeter | None = None  # hears of every attempt (the spending limit)

    @property
    def retries(self) -> Counter[str]:
        """Retries by status or failure kind, over the whole run."""
        return self.client.retries

    def _read(self, call: Call, reply: HttpReply) -> tuple[Reply, int]:
        """A 200's reply and its billed input tokens; ProviderError when it is unusable."""
        request_id = reply.headers.get(JEV.request_id_header)
        request_id = None if request_id is None else self.redact(request_id)
        try:
            wire = parse_reply(call.request, reply.body)
        except ProviderError as error:
            if not is_json(reply.body):  # a proxy's page, a cut reply: try again
                raise ProviderError(
                    f"HTTP 200 with a body that is not JSON ({self._preview(reply)})",
                    kind=NON_JSON_KIND,
                    retryable=True,
                    request_id=request_id,
                ) from None
            # JSON that fails the schema is the service's answer: a failed row, not retried;
            # its message may quote the reply (answer ids), so it is masked too
            raise ProviderError(
                self.redact(str(error)), kind=error.kind, request_id=request_id
            ) from None
        wire = masked_reply(wire, self.redact)  # a server that echoes the key stores none
        # Built from fields the wire model has just validated (the same answer types): not
        # validated again. Every field is given: a default left out costs pydantic a look at
        # its factory's signature on each call (4x the construction).
        usage = TokenUsage.model_construct(
            input_tokens=wire.usage.input_tokens, output_tokens=wire.usage.output_tokens
        )
        value = Reply.model_construct(
            model=wire.model,
            answers=wire.answers,
            usage=usage,
            latency_ms=0.0,
            request_id=request_id,
            attempts=1,
            retries={},
            wall_ms=0.0,
            cached=False,
        )
        return value, wire.usage.input_tokens

    def _preview(self, reply: HttpReply) -> str:
        kind = reply.headers.get("content-type", "no content type").split(";")[0]
        start = self.redact(reply.text)[:80].strip()
        preview = f"{kind}, {len(reply.body)} bytes" + (f": {start}" if start else "")
        return self.redact(preview)  # the content type is the server's string too

    async def fetch_answers(self, call: Call) -> Reply:
        too_large = oversize_reason(call.request, self.settings.limits)
        if too_large is not None:  # the service would refuse it (or bill it in full)
            raise ProviderError(too_large, kind=TOO_LARGE_KIND)
        estimate = estimate_input_tokens(call.request)
        meter = None if self.meter is None else CallMeter(self.meter, call)
        outcome: Outcome[Reply] = await self.client.call(
            ENDPOINT, call.request.body(), estimate, lambda reply: self._read(call, reply), meter
        )
        return outcome.value.model_copy(
            update={
                "latency_ms": outcome.latency_ms,
                "attempts": outcome.attempts,
                "retries": outcome.retries,
                "wall_ms": outcome.wall_ms,
            }
        )

    async def aclose(self) -> None:
        await self.client.aclose()


@dataclass(frozen=True, slots=True)
class CallMeter:
    """The spending limit's view of one call's attempts (each is reserved before it is sent)."""

    meter: AttemptMeter
    call: Call

    def begin(self) -> float:
        return self.meter.begin(self.call)

    def end(self, reserved: float, value: Reply | None, error: BaseException | None) -> None:
        self.meter.end(reserved, value, error)


class OfflineJev:
    """Stands in for Jev under ``--offline``: never touches the network, needs no key.

    Only reached on a cache miss, which is then a failed row of kind ``cache-miss``.
    """

    name = "jev"
    endpoint = ENDPOINT

    def __init__(self, model: str) -> None:
        self.model = model

    async def fetch_answers(self, call: Call) -> Reply:
        raise ProviderError("no cached reply and --offline is set", kind="cache-miss")

    async def aclose(self) -> None:
        return None
