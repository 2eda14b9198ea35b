"""The one retrying HTTP client under both live providers (Jev and the chat judge), on
asyncio (async I/O).

Per call: rate limiter slot -> one attempt bounded as a whole by ``attempt_timeout_s``
(connect, send, reply and decoding) -> retries with capped exponential backoff and jitter,
``retry-after-ms`` / ``Retry-After`` honoured on every retried status (up to
``retry_after_cap_s``), all within ``row_deadline_s`` when one is set. Retried: 408, 429,
every 5xx, connection errors, timeouts, and whatever the caller's reader marks retryable.
A 401 or 403 stops the whole run (:class:`~ragbatch.core._errors.RunAborted`), and so does a
TLS certificate that fails verification (every call would fail alike; nothing was sent). The
first attempt runs outside tenacity: most calls need no other.

The wire (:func:`ragbatch.providers._http_wire.open_wire`) is the project's own keep-alive
HTTP/1.1 connections with llhttp's framing (:mod:`ragbatch.providers._http_conn`) for a
direct origin, aiohttp's session through a proxy; no limit on connections (the limiter
bounds the calls in flight). What the providers see is :class:`HttpReply`, the project's own
small reply type, and the project's failure kinds;
:func:`ragbatch.providers._http_errors.failure_kind` is the one mapping of a wire's errors
to them (the wires are imported only once a client is built):

* ``timeout``: no complete reply within the attempt's time;
* ``connection``: refused, reset, dropped before or during the reply, TLS failures other
  than a refused certificate: a dropped connection is never counted as a timeout;
* ``invalid-http-response``: a reply that breaks HTTP (a duplicate ``Content-Length``, a
  bad chunk, a coding the request did not accept, a compressed body cut short, a switch of
  protocols). Not retried (the server would send it again); the call keeps its estimate
  against the budget (the request may have been served and billed);
* ``response-too-large``: the body, once decoded, is over ``max_response_bytes`` (default
  16 MiB; a declared ``Content-Length`` over it fails before any byte is read), or the head
  over 64 KiB, counted as it arrives (an endless header line fails there). Decoding
  happens as the body arrives, in bounded pieces, inside the attempt's deadline, so a
  compressed bomb or an endless chunked reply costs at most the cap. Not retried (the
  same request would get the same reply); the call keeps its estimate against the budget.

Proxies: ``HTTPS_PROXY``/``HTTP_PROXY``/``ALL_PROXY``/``NO_PROXY`` (any case) are read once,
for the base URL, as curl and requests read them (:mod:`ragbatch.providers._http_proxy`: ports
and CIDR blocks in ``NO_PROXY``; a loopback host is never proxied). aiohttp's own
``trust_env`` would read the same variables but also look up ``~/.netrc`` in a thread on
every request and refuse a request that has both a netrc entry and our ``Authorization``
header. TLS: ``verify`` is True (the system's CA bundle), False (no check) or the path of a
CA bundle. Redirects are never followed (a key must not follow one to another host).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar
from urllib.parse import urlsplit

from ragbatch.core import ProviderError, RateLimited, RunAborted
from ragbatch.providers._apikey import Redactor
from ragbatch.providers._http_errors import (
    BAD_REPLY_KIND,
    CERTIFICATE_KIND,
    RESPONSE_TOO_LARGE_KIND,
    failure_kind,
)
from ragbatch.providers._http_types import DEFAULT_MAX_RESPONSE_BYTES, Policy
from ragbatch.providers._ratelimit import RateLimiter
from ragbatch.providers._replies import HttpReply, error_message, parse_retry_after

if TYPE_CHECKING:  # tenacity (and tornado, which it imports when installed): on a first retry
    from tenacity import RetryCallState

T = TypeVar("T")
T_contra = TypeVar("T_contra", contravariant=True)

RETRY_STATUSES = frozenset({408, 429}) | frozenset(range(500, 600))
THROTTLE_STATUSES = frozenset({429, 529})


@dataclass(frozen=True)
class Service:
    """What differs between the services one client may talk to."""

    label: str  # "the Jev API", in messages
    key_source: str  # where the key comes from, for the 401 message
    request_id_header: str
    url_source: str = "the base URL"  # where the URL comes from, for a refused certificate


@dataclass(frozen=True, slots=True)
class Outcome(Generic[T]):
    """A successful call: what the reader made of the reply, and what it took."""

    value: T
    latency_ms: float  # the successful attempt's
    attempts: int
    retries: dict[str, int]
    wall_ms: float


class AttemptHook(Protocol[T_contra]):
    """Hears of every attempt: before it is sent (what it reserves; raise to send nothing)
    and after it ends (the value it read, or the error it ended in)."""

    def begin(self) -> float: ...

    def end(self, reserved: float, value: T_contra | None, error: BaseException | None) -> None: ...


class RetryingClient:
    """Limiter, one attempt's deadline, retries, status handling and redaction, for one
    endpoint of one service; the caller's ``read`` turns a 200 into its value."""

    def __init__(
        self,
        base_url: str,
        key: str,
        limiter: RateLimiter,
        policy: Policy,
        service: Service,
        redact: Redactor,
    ) -> None:
        # the proxy look-up (urllib.request) and the wires: once a client is built
        from ragbatch.providers._http_wire import open_wire

        self.wire = open_wire(base_url, policy)
        parts = urlsplit(base_url)
        netloc = parts.hostname if parts.port is None else f"{parts.hostname}:{parts.port}"
        self._origin = f"{parts.scheme}://{netloc}"  # no credentials: it goes in messages
        self._wire_errors = self.wire.errors
        self.limiter, self.policy, self.service, self.redact = limiter, policy, service, redact
        self._headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
        self.retries: Counter[str] = Counter()

    def _wait(self, state: RetryCallState) -> float:
        # Exponential backoff with jitter, computed here: tenacity's wait_exponential_jitter
        # renamed its ``initial`` argument across the supported range.
        exc = state.outcome.exception() if state.outcome is not None else None
        if isinstance(exc, ProviderError) and exc.retry_after is not None:
            return min(max(exc.retry_after, 0.0), self.policy.retry_after_cap_s)
        initial, cap = self.policy.backoff_initial_s, self.policy.backoff_max_s
        exponent = min(state.attempt_number - 1, 64)
        return min(initial * 2.0**exponent + random.uniform(0, initial / 4), cap)

    async def _attempt(
        self,
        path: str,
        body: bytes,
        estimate: int,
        read: Callable[[HttpReply], tuple[T, int]],
        meter: AttemptHook[T] | None,
    ) -> tuple[T, float]:
        if meter is None:
            return await self._send(path, body, estimate, read)
        reserved = meter.begin()  # may refuse (budget-exhausted): nothing is sent
        try:
            result = await self._send(path, body, estimate, read)
        except BaseException as error:
            meter.end(reserved, None, error)
            raise
        meter.end(reserved, result[0], None)
        return result

    async def _send(
        self, path: str, body: bytes, estimate: int, read: Callable[[HttpReply], tuple[T, int]]
    ) -> tuple[T, float]:
        async with self.limiter.slot(estimate) as epoch:
            started = time.perf_counter()
            try:
                reply = await self.wire.post(path, body, self._headers)
            except self._wire_errors as exc:
                raise self._failed(exc, estimate) from None
            latency_ms = (time.perf_counter() - started) * 1000
        if reply.status != 200:
            self.limiter.settle(estimate, 0)
            raise self._refused(reply, epoch)
        try:
            value, input_tokens = read(reply)
        except ProviderError as error:
            if error.retryable:  # e.g. a proxy's page instead of the reply: not billed
                self.limiter.settle(estimate, 0)
            raise  # a malformed reply keeps its estimate: it may have been billed
        self.limiter.settle(estimate, input_tokens)
        self.limiter.on_success()
        return value, latency_ms

    def _failed(self, exc: BaseException, estimate: int) -> Exception:
        kind = failure_kind(exc)
        if kind == RESPONSE_TOO_LARGE_KIND:  # the request was served: keep its estimate
            return ProviderError(self.redact(f"reply too large: {exc}"), kind=kind)
        if kind == BAD_REPLY_KIND:  # served, and the same request gets the same reply
            return ProviderError(self.redact(f"invalid HTTP reply: {exc}"), kind=kind)
        self.limiter.settle(estimate, 0)
        if kind == CERTIFICATE_KIND:  # every call would fail alike: stop, as for a bad key
            reason = getattr(exc, "verify_message", None) or str(exc)
            return RunAborted(
                self.redact(
                    f"{self.service.label} at {self._origin} presented a TLS certificate that "
                    f"failed verification ({reason}); check {self.service.url_source}, or "
                    "point SSL_CERT_FILE at a CA bundle that trusts it (no request was sent)"
                )
            )
        if kind == "timeout":
            message = f"no complete reply within {self.policy.attempt_timeout_s} s"
        else:
            detail = str(exc) or "the server closed the connection"
            message = self.redact(f"connection error: {type(exc).__name__}: {detail}")
        return ProviderError(message, kind=kind, retryable=True)

    def _refused(self, reply: HttpReply, epoch: int) -> Exception:
        status, headers = reply.status, reply.headers
        request_id = headers.get(self.service.request_id_header)
        request_id = None if request_id is None else self.redact(request_id)
        message = self.redact(f"HTTP {status}: {error_message(reply, self.redact)}")
        if status in (401, 403):
            return RunAborted(
                f"{self.service.label} rejected the key ({message}); check "
                f"{self.service.key_source}" + (f" (request id {request_id})" if request_id else "")
            )
        if status in THROTTLE_STATUSES:
            retry_after = parse_retry_after(headers)
            cap = self.policy.retry_after_cap_s
            reason = f"HTTP {status}"
            if retry_after is not None:
                capped = f", capped at {cap:g} s" if retry_after > cap else ""
                reason += f", Retry-After {retry_after:g} s{capped}"
            hold = None if retry_after is None else min(retry_after, cap)
            self.limiter.on_throttled(hold, epoch, reason)
            return RateLimited(
                message, status=status, retry_after=retry_after, request_id=request_id
            )
        retryable = status in RETRY_STATUSES
        return ProviderError(
            message,
            kind="server-error" if status >= 500 else f"http-{status}",
            status=status,
            retryable=retryable,
            request_id=request_id,
            # every retried status may say when to come back (a 503 often does)
            retry_after=parse_retry_after(headers) if retryable else None,
        )

    async def call(
        self,
        path: str,
        body: bytes,
        estimate: int,
        read: Callable[[HttpReply], tuple[T, int]],
        meter: AttemptHook[T] | None = None,
    ) -> Outcome[T]:
        """POST ``body`` to ``path`` until ``read`` accepts a 200 or the retries are spent:
        the outcome, or the last ProviderError (with ``wall_ms`` and ``retries`` set).
        ``meter`` hears of every attempt before it is sent and after it ends."""
        started = time.perf_counter()
        retries: dict[str, int] = {}

        def count_retry(state: RetryCallState) -> None:
            exc = state.outcome.exception() if state.outcome else None
            tag = str(exc.status or exc.kind) if isinstance(exc, ProviderError) else "error"
            retries[tag] = retries.get(tag, 0) + 1
            self.retries[tag] += 1

        async def again(failed: list[ProviderError]) -> tuple[T, float]:
            # tenacity's first outcome is the first attempt's failure, so counts, backoff
            # and stop are those of one loop over every attempt
            if failed:
                raise failed.pop()
            return await self._attempt(path, body, estimate, read, meter)

        deadline = self.policy.row_deadline_s
        try:
            # asyncio's timeout, not anyio's fail_after: the same deadline for a fraction of
            # the CPU a call (a cancel scope looks up the task and the backend on entry and
            # exit). Both wires are on asyncio, whose own timeouts work alike.
            async with asyncio.timeout(deadline):
                try:  # the first attempt outside tenacity: most calls need no other
                    value, latency_ms = await self._attempt(path, body, estimate, read, meter)
                except ProviderError as failed:
                    if not failed.retryable or self.policy.max_retries < 1:
                        raise
                    from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt

                    retrying = AsyncRetrying(
                        stop=stop_after_attempt(self.policy.max_retries + 1),
                        wait=self._wait,
                        retry=retry_if_exception(
                            lambda e: isinstance(e, ProviderError) and e.retryable
                        ),
                        before_sleep=count_retry,
                        reraise=True,
                    )
                    value, latency_ms = await retrying(again, [failed])
        except TimeoutError:
            error = ProviderError(
                f"row deadline of {deadline} s exceeded after {sum(retries.values()) + 1} "
                "attempt(s)",
                kind="deadline-exceeded",
            )
            error.wall_ms, error.retries = (time.perf_counter() - started) * 1000, retries
            raise error from None
        except ProviderError as error:
            error.wall_ms, error.retries = (time.perf_counter() - started) * 1000, retries
            raise
        wall_ms = (time.perf_counter() - started) * 1000
        return Outcome(value, latency_ms, sum(retries.values()) + 1, retries, wall_ms)

    async def aclose(self) -> None:
        """Close the pooled connections."""
        await self.wire.aclose()


__all__ = [
    "DEFAULT_MAX_RESPONSE_BYTES",
    "RESPONSE_TOO_LARGE_KIND",
    "RETRY_STATUSES",
    "THROTTLE_STATUSES",
    "HttpReply",
    "Outcome",
    "Policy",
    "RetryingClient",
    "Service",
]
