"""The live Jev provider: ``POST {base}/v1/systemone`` over one pooled httpx client (async I/O).

Per call: rate limiter slot -> per-attempt timeout -> tenacity retries around the HTTP call
only. Retried: 408, 429, every 5xx (529 included), connection errors and timeouts, with
exponential backoff and jitter, capped, and ``retry-after-ms`` / ``Retry-After`` (seconds or
an HTTP-date) honoured. Never retried: 400, 401, 403, 404, 422 and malformed replies. A 401 or
403 stops the whole run (a wrong key would fail every row). The overall per-row deadline
bounds all attempts and waits together. The API key never appears in an error message.
"""

from __future__ import annotations

import email.utils
import math
import random
import time
from collections import Counter
from dataclasses import dataclass

import anyio
import httpx
import orjson
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
)

from ragbatch.core.errors import ProviderError, RateLimited, RunAborted
from ragbatch.core.provider import Call, Reply
from ragbatch.core.questions import estimate_input_tokens
from ragbatch.core.schema import TokenUsage
from ragbatch.core.wire import parse_reply
from ragbatch.providers.ratelimit import RateLimiter
from ragbatch.providers.transport import HttpClient, LeanClient

DEFAULT_BASE_URL = "https://api.typesafe.ai"
DEFAULT_MODEL = "jev-latest"
ENDPOINT = "/v1/systemone"
MODEL_ALIASES = frozenset({"jev-latest", "jev-preview"})
RETRY_STATUSES = frozenset({408, 429}) | frozenset(range(500, 600))
THROTTLE_STATUSES = frozenset({429, 529})


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


def error_message(response: httpx.Response) -> str:
    """The service's own message from a JSON error body, else the start of the body."""
    try:
        body = orjson.loads(response.content)
    except orjson.JSONDecodeError:
        return response.text[:200].strip() or response.reason_phrase
    detail = body.get("error") or body.get("detail") if isinstance(body, dict) else body
    if detail is None:  # JSON without a known message field: show the body, not "None"
        return response.text[:200].strip() or response.reason_phrase
    if isinstance(detail, dict):
        detail = detail.get("message", detail)
    if isinstance(detail, list) and detail and isinstance(detail[0], dict):
        detail = "; ".join(str(d.get("msg", d)) for d in detail)
    return str(detail)[:300]


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
        if not settings.api_key:
            raise RunAborted("no API key: set TYPESAFE_API_KEY (or pass --api-key)")
        self.settings = settings
        self.model = settings.model
        self.limiter = limiter
        # One client for the run; its transport keeps one keep-alive connection per call in
        # flight (at most --concurrency, since the limiter bounds the calls in flight).
        self.client = client or LeanClient(settings.base_url, settings.attempt_timeout_s)
        self._auth = {"Authorization": f"Bearer {settings.api_key}"}
        self.retries: Counter[str] = Counter()

    def redact(self, text: str) -> str:
        key = self.settings.api_key
        return text.replace(key, "***") if key else text

    def _wait(self, state: RetryCallState) -> float:
        # Exponential backoff with jitter, computed here: tenacity's wait_exponential_jitter
        # renamed its ``initial`` argument (deprecated in 9.x), and both spellings are needed
        # across the supported tenacity range.
        initial, cap = self.settings.backoff_initial_s, self.settings.backoff_max_s
        exponent = min(state.attempt_number - 1, 64)
        backoff = min(initial * 2.0**exponent + random.uniform(0, initial / 4), cap)
        outcome = state.outcome
        exc = outcome.exception() if outcome is not None else None
        if isinstance(exc, RateLimited) and exc.retry_after is not None:
            return min(max(exc.retry_after, 0.0), self.settings.retry_after_cap_s)
        return backoff

    async def _attempt(self, call: Call, estimate: int) -> tuple[Reply, float]:
        async with self.limiter.slot(estimate) as epoch:
            started = time.perf_counter()
            try:
                response = await self.client.post(
                    ENDPOINT,
                    content=call.request.body(),
                    headers={**self._auth, "Content-Type": "application/json"},
                )
            except httpx.TimeoutException:
                self.limiter.settle(estimate, 0)
                raise ProviderError(
                    f"no reply within {self.settings.attempt_timeout_s} s",
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
        status = response.status_code
        if status != 200:
            self.limiter.settle(estimate, 0)
            message = self.redact(f"HTTP {status}: {error_message(response)}")
            if status in (401, 403):
                raise RunAborted(
                    f"the Jev API rejected the key ({message}); check TYPESAFE_API_KEY"
                    + (f" (request id {request_id})" if request_id else "")
                )
            if status in THROTTLE_STATUSES:
                retry_after = parse_retry_after(response.headers)
                cap = self.settings.retry_after_cap_s
                hold = None if retry_after is None else min(retry_after, cap)
                self.limiter.on_throttled(hold, epoch)
                raise RateLimited(
                    message, status=status, retry_after=retry_after, request_id=request_id
                )
            retryable = status in RETRY_STATUSES
            kind = "server-error" if status >= 500 else f"http-{status}"
            raise ProviderError(
                message, kind=kind, status=status, retryable=retryable, request_id=request_id
            )
        wire = parse_reply(call.request, response.content, request_id)
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

    async def fetch_answers(self, call: Call) -> Reply:
        estimate = estimate_input_tokens(call.request)
        started = time.perf_counter()
        retries: Counter[str] = Counter()

        def count_retry(state: RetryCallState) -> None:
            exc = state.outcome.exception() if state.outcome else None
            label = str(exc.status) if isinstance(exc, ProviderError) and exc.status else None
            tag = label or (exc.kind if isinstance(exc, ProviderError) else "error")
            retries[tag] += 1
            self.retries[tag] += 1

        retrying = AsyncRetrying(
            stop=stop_after_attempt(self.settings.max_retries + 1),
            wait=self._wait,
            retry=retry_if_exception(lambda e: isinstance(e, ProviderError) and e.retryable),
            before_sleep=count_retry,
            reraise=True,
        )
        try:
            with anyio.fail_after(self.settings.row_deadline_s):
                result: tuple[Reply, float] = await retrying(self._attempt, call, estimate)
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
