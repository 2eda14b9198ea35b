"""The live Jev provider: ``POST {base}/v1/systemone`` over one pooled httpx client (async I/O).

Per call: rate limiter slot -> per-attempt timeout -> tenacity retries around the HTTP call
only. Retried: 408, 429, every 5xx (529 included), a 200 whose body is not JSON (a proxy's
page, a cut reply), connection errors and timeouts, with exponential backoff and jitter,
capped; ``retry-after-ms`` / ``Retry-After`` (seconds or an HTTP-date, up to
``retry_after_cap_s``) is honoured on every retried status, 503 as much as 429. Never
retried: 400, 401, 403, 404, 422 and JSON replies that fail the schema
(``malformed-response``). A 401 or 403 stops the whole run (a wrong key would fail every row).
``--timeout`` bounds each attempt as a whole (a reply trickling in fails at it); the overall
per-row deadline bounds all attempts and waits together. The API key is trimmed and checked
before the first request, and never appears in an error message in any spelling. A request
over the documented size limits is not sent: its row fails with kind ``request-too-large``.
"""

from __future__ import annotations

import email.utils
import json
import math
import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import anyio
import httpx
import orjson
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
)

from ragbatch.core.errors import TOO_LARGE_KIND, ProviderError, RateLimited, RunAborted
from ragbatch.core.provider import AttemptMeter, Call, Reply
from ragbatch.core.questions import RequestLimits, estimate_input_tokens, oversize_reason
from ragbatch.core.schema import TokenUsage
from ragbatch.core.wire import parse_reply
from ragbatch.providers.apikey import Redactor, check_base_url, clean_key, masked_reply
from ragbatch.providers.ratelimit import RateLimiter
from ragbatch.providers.transport import HttpClient, LeanClient

DEFAULT_BASE_URL = "https://api.typesafe.ai"
DEFAULT_MODEL = "jev-latest"
ENDPOINT = "/v1/systemone"
MODEL_ALIASES = frozenset({"jev-latest", "jev-preview"})
KEY_SOURCE = "TYPESAFE_API_KEY or --api-key"
RETRY_STATUSES = frozenset({408, 429}) | frozenset(range(500, 600))
THROTTLE_STATUSES = frozenset({429, 529})
NON_JSON_KIND = "non-json-response"  # a 200 whose body is not JSON: retried like a 5xx


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

    def __repr__(self) -> str:  # never show the key
        return f"JevSettings(base_url={self.base_url!r}, model={self.model!r}, api_key=***)"


def parse_retry_after(headers: httpx.Headers, now: float | None = None) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``Retry-After`` (seconds or HTTP-date)."""
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            value = float(ms) / 1000
            if math.isfinite(value) and value >= 0:
                return value
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if raw is None:
        return None
    try:
        value = float(raw)
        return value if math.isfinite(value) and value >= 0 else None
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _located(entry: dict[str, object]) -> str:
    """One FastAPI ``detail[]`` entry as ``questions.q.noul.criteria: msg`` (``body`` dropped)."""
    loc = entry.get("loc")
    path = [str(p) for p in loc] if isinstance(loc, list) else []
    path = path[1:] if path[:1] == ["body"] else path
    message = str(entry.get("msg", entry))
    return f"{'.'.join(path)}: {message}" if path else message


def is_json(body: bytes) -> bool:
    """Whether ``body`` parses as JSON at all (NaN and Infinity included: a body that uses
    them is the service's own reply, validated as such, not a proxy's page)."""
    try:
        json.loads(body)
    except ValueError:  # JSONDecodeError and UnicodeDecodeError alike
        return False
    return True


def _same(text: str) -> str:
    return text


def error_message(response: httpx.Response, redact: Callable[[str], str] = _same) -> str:
    """The service's own message from a JSON error body, else the start of the body.

    Knows ``{"detail": [...]}`` (422, each message with its ``loc`` path), ``{"detail":
    {"message"}}``, ``{"error": ...}`` and a top-level ``{"message": ...}``. ``redact`` masks
    secrets in the whole text before it is cut to length: a key straddling
    the cut would otherwise leave its prefix behind.
    """
    try:
        body = orjson.loads(response.content)
    except orjson.JSONDecodeError:
        return redact(response.text)[:200].strip() or response.reason_phrase
    detail = body.get("error") or body.get("detail") if isinstance(body, dict) else body
    if detail is None and isinstance(body, dict):
        detail = body.get("message")
    if detail is None:  # JSON without a known message field: show the body, not "None"
        return redact(response.text)[:200].strip() or response.reason_phrase
    if isinstance(detail, dict):
        detail = detail.get("message", detail)
    if isinstance(detail, list) and detail and isinstance(detail[0], dict):
        detail = "; ".join(_located(d) if isinstance(d, dict) else str(d) for d in detail)
    return redact(str(detail))[:300]


class JevProvider:
    """Provider protocol over the real Jev API."""

    name = "jev"
    endpoint = ENDPOINT

    def __init__(
        self,
        settings: JevSettings,
        limiter: RateLimiter,
        client: HttpClient | None = None,
    ) -> None:
        # the key as given, for the redactor; trimmed and checked (RunAborted) before any use
        self.redact = Redactor(settings.api_key)
        settings = replace(settings, api_key=clean_key(settings.api_key, KEY_SOURCE))
        check_base_url(
            settings.base_url, "--base-url", allow_insecure_http=settings.allow_insecure_http
        )
        self.settings = settings
        self.model = settings.model
        self.limiter = limiter
        # One client for the run; its transport keeps one keep-alive connection per call in
        # flight (at most --concurrency, since the limiter bounds the calls in flight).
        self.client = client or LeanClient(settings.base_url, settings.attempt_timeout_s)
        self._auth = {"Authorization": f"Bearer {settings.api_key}"}
        # A client whose timeout bounds each call as a whole needs no second scope around it.
        whole_call = getattr(self.client, "whole_call_s", None)
        self._attempt_scope = whole_call is None or whole_call > settings.attempt_timeout_s
        self.retries: Counter[str] = Counter()
        self.meter: AttemptMeter | None = None  # hears of every attempt (the spending limit)

    def _wait(self, state: RetryCallState) -> float:
        # Exponential backoff with jitter, computed here: tenacity's wait_exponential_jitter
        # renamed its ``initial`` argument (deprecated in 9.x), and both spellings are needed
        # across the supported tenacity range.
        initial, cap = self.settings.backoff_initial_s, self.settings.backoff_max_s
        exponent = min(state.attempt_number - 1, 64)
        backoff = min(initial * 2.0**exponent + random.uniform(0, initial / 4), cap)
        outcome = state.outcome
        exc = outcome.exception() if outcome is not None else None
        if isinstance(exc, ProviderError) and exc.retry_after is not None:
            return min(max(exc.retry_after, 0.0), self.settings.retry_after_cap_s)
        return backoff

    async def _attempt(self, call: Call, estimate: int) -> tuple[Reply, float]:
        meter = self.meter
        if meter is None:
            return await self._send(call, estimate)
        reserved = meter.begin(call)  # may refuse (budget-exhausted): nothing is sent
        try:
            result = await self._send(call, estimate)
        except BaseException as error:
            meter.end(reserved, None, error)
            raise
        meter.end(reserved, result[0], None)
        return result

    async def _send(self, call: Call, estimate: int) -> tuple[Reply, float]:
        async with self.limiter.slot(estimate) as epoch:
            started = time.perf_counter()
            try:
                # the whole attempt, not each read: a reply trickling in a byte at a time
                # must not hold the row until its deadline
                sending = self.client.post(
                    ENDPOINT,
                    content=call.request.body(),
                    headers={**self._auth, "Content-Type": "application/json"},
                )
                if self._attempt_scope:
                    with anyio.fail_after(self.settings.attempt_timeout_s):
                        response = await sending
                else:
                    response = await sending
            except (httpx.TimeoutException, TimeoutError):
                self.limiter.settle(estimate, 0)
                raise ProviderError(
                    f"no complete reply within {self.settings.attempt_timeout_s} s",
                    kind="timeout",
                    retryable=True,
                ) from None
            except httpx.TransportError as exc:
                self.limiter.settle(estimate, 0)
                raise ProviderError(
                    self.redact(f"connection error: {type(exc).__name__}: {exc}"),
                    kind="connection",
                    retryable=True,
                ) from None
            latency_ms = (time.perf_counter() - started) * 1000
        return self._read(call, response, estimate, epoch), latency_ms

    def _read(self, call: Call, response: httpx.Response, estimate: int, epoch: int) -> Reply:
        request_id = response.headers.get("x-typesafe-request-id")
        request_id = None if request_id is None else self.redact(request_id)
        status = response.status_code
        if status != 200:
            self.limiter.settle(estimate, 0)
            message = self.redact(f"HTTP {status}: {error_message(response, self.redact)}")
            if status in (401, 403):
                raise RunAborted(
                    f"the Jev API rejected the key ({message}); check TYPESAFE_API_KEY"
                    + (f" (request id {request_id})" if request_id else "")
                )
            if status in THROTTLE_STATUSES:
                retry_after = parse_retry_after(response.headers)
                cap = self.settings.retry_after_cap_s
                hold = None if retry_after is None else min(retry_after, cap)
                reason = f"HTTP {status}"
                if retry_after is not None:
                    capped = f", capped at {cap:g} s" if retry_after > cap else ""
                    reason += f", Retry-After {retry_after:g} s{capped}"
                self.limiter.on_throttled(hold, epoch, reason)
                raise RateLimited(
                    message, status=status, retry_after=retry_after, request_id=request_id
                )
            retryable = status in RETRY_STATUSES
            kind = "server-error" if status >= 500 else f"http-{status}"
            raise ProviderError(
                message,
                kind=kind,
                status=status,
                retryable=retryable,
                request_id=request_id,
                # every retried status may say when to come back (a 503 often does)
                retry_after=parse_retry_after(response.headers) if retryable else None,
            )
        try:
            wire = parse_reply(call.request, response.content)
        except ProviderError as error:
            if not is_json(response.content):  # a proxy's page, a cut reply: try again
                self.limiter.settle(estimate, 0)
                raise ProviderError(
                    f"HTTP 200 with a body that is not JSON ({self._preview(response)})",
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
        self.limiter.settle(estimate, wire.usage.input_tokens)
        self.limiter.on_success()
        return Reply(
            model=wire.model,
            answers=wire.answers,
            usage=TokenUsage(
                input_tokens=wire.usage.input_tokens, output_tokens=wire.usage.output_tokens
            ),
            latency_ms=0.0,
            request_id=request_id,
        )

    def _preview(self, response: httpx.Response) -> str:
        kind = response.headers.get("content-type", "no content type").split(";")[0]
        start = self.redact(response.text)[:80].strip()
        preview = f"{kind}, {len(response.content)} bytes" + (f": {start}" if start else "")
        return self.redact(preview)  # the content type is the server's string too

    def _retrying(self, before_sleep: Callable[[RetryCallState], None]) -> AsyncRetrying:
        return AsyncRetrying(
            stop=stop_after_attempt(self.settings.max_retries + 1),
            wait=self._wait,
            retry=retry_if_exception(lambda e: isinstance(e, ProviderError) and e.retryable),
            before_sleep=before_sleep,
            reraise=True,
        )

    async def _again(
        self, failed: list[ProviderError], call: Call, estimate: int
    ) -> tuple[Reply, float]:
        """Tenacity's attempts after a failed first one: its first outcome is that failure
        (so counts, backoff and stop are those of one loop over every attempt)."""
        if failed:
            raise failed.pop()
        return await self._attempt(call, estimate)

    async def fetch_answers(self, call: Call) -> Reply:
        too_large = oversize_reason(call.request, self.settings.limits)
        if too_large is not None:  # the service would refuse it (or bill it in full)
            raise ProviderError(too_large, kind=TOO_LARGE_KIND)
        estimate = estimate_input_tokens(call.request)
        started = time.perf_counter()
        retries: Counter[str] = Counter()

        def count_retry(state: RetryCallState) -> None:
            exc = state.outcome.exception() if state.outcome else None
            label = str(exc.status) if isinstance(exc, ProviderError) and exc.status else None
            tag = label or (exc.kind if isinstance(exc, ProviderError) else "error")
            retries[tag] += 1
            self.retries[tag] += 1

        try:
            with anyio.fail_after(self.settings.row_deadline_s):
                first: list[ProviderError] = []
                try:  # the first attempt outside tenacity: most rows need no other
                    result: tuple[Reply, float] = await self._attempt(call, estimate)
                except ProviderError as failed:
                    if not failed.retryable or self.settings.max_retries < 1:
                        raise
                    first.append(failed)
                if first:  # then the same loop as from the start, this failure its first outcome
                    retrying = self._retrying(count_retry)
                    result = await retrying(self._again, first, call, estimate)
                reply, latency_ms = result
        except TimeoutError:
            error = ProviderError(
                f"row deadline of {self.settings.row_deadline_s} s exceeded "
                f"after {sum(retries.values()) + 1} attempt(s)",
                kind="deadline-exceeded",
            )
            error.wall_ms = (time.perf_counter() - started) * 1000
            error.retries = dict(retries)
            raise error from None
        except ProviderError as error:
            error.wall_ms = (time.perf_counter() - started) * 1000
            error.retries = dict(retries)
            raise
        return reply.model_copy(
            update={
                "latency_ms": latency_ms,
                "attempts": sum(retries.values()) + 1,
                "retries": dict(retries),
                "wall_ms": (time.perf_counter() - started) * 1000,
            }
        )

    async def aclose(self) -> None:
        await self.client.aclose()


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
