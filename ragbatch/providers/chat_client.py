"""A client for OpenAI-compatible ``POST {base}/v1/chat/completions`` with JSON replies (async I/O).

Shared by the ``llm`` baseline judge and the LLM claim extractor. ``base`` is the URL without
``/v1`` (e.g. ``https://api.openai.com``). Every request asks for ``temperature: 0`` and a
JSON-object reply. Per call: rate limiter slot -> per-attempt timeout -> tenacity retries
around the HTTP call only, as for Jev: 408, 429, 5xx, connection errors and timeouts are
retried with capped exponential backoff and jitter, ``retry-after-ms`` / ``Retry-After``
honoured; 401/403 abort the run; anything else is a failed call. A 200 whose
``choices[0].message.content`` is not a JSON object, or whose usage is not a pair of counts, is
a ``malformed-response`` ProviderError (never retried). The key, read by the caller from
``RAGBATCH_JUDGE_API_KEY``, is sent only in the ``Authorization`` header and redacted from
every error message.
"""

from __future__ import annotations

import math
import random
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any, cast

import anyio
import httpx
import orjson
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt

from ragbatch.core.errors import ProviderError, RateLimited, RunAborted
from ragbatch.core.schema import TokenUsage
from ragbatch.providers.apikey import Redactor, check_base_url, clean_key, masked_json
from ragbatch.providers.jev import (
    RETRY_STATUSES,
    THROTTLE_STATUSES,
    error_message,
    parse_retry_after,
)
from ragbatch.providers.ratelimit import RateLimiter
from ragbatch.providers.transport import FanOutTransport

API_KEY_ENV = "RAGBATCH_JUDGE_API_KEY"
CHAT_ENDPOINT = "/v1/chat/completions"
RETRY_AFTER_CAP_S = 60.0
Messages = list[dict[str, str]]


def malformed(message: str, request_id: str | None = None) -> ProviderError:
    """A ``malformed-response`` error: the reply is unusable and is not retried."""
    return ProviderError(
        f"malformed response: {message}", kind="malformed-response", request_id=request_id
    )


@dataclass(frozen=True, slots=True)
class ChatReply:
    """A validated chat completion: the content's JSON object, answering model, usage."""

    content: dict[str, Any]
    model: str
    usage: TokenUsage
    estimated: bool  # the reply had no usage block: tokens estimated at ~4 characters each
    latency_ms: float
    request_id: str | None


class ChatClient:
    """One pooled client for ``/v1/chat/completions`` with limiter, retries and redaction."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        model: str,
        limiter: RateLimiter,
        *,
        timeout_s: float = 30.0,
        max_retries: int = 4,
        backoff_initial_s: float = 0.5,
        backoff_max_s: float = 5.0,
        allow_insecure_http: bool = False,
    ) -> None:
        self.redact = Redactor(api_key)  # the key as given; trimmed and checked before use
        self._key = clean_key(api_key, API_KEY_ENV, "judge API key")
        check_base_url(base_url, "--judge-base-url", allow_insecure_http=allow_insecure_http)
        self.model, self.limiter, self.timeout_s = model, limiter, timeout_s
        self.max_retries, self.backoff = max_retries, (backoff_initial_s, backoff_max_s)
        self.client = httpx.AsyncClient(
            base_url=base_url.rstrip("/"),
            transport=FanOutTransport(),
            timeout=httpx.Timeout(timeout_s),
        )
        self.retries: Counter[str] = Counter()

    def _wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome is not None else None
        if isinstance(exc, ProviderError) and exc.retry_after is not None:
            return min(max(exc.retry_after, 0.0), RETRY_AFTER_CAP_S)
        initial, cap = self.backoff
        exponent = min(state.attempt_number - 1, 64)
        return min(initial * 2.0**exponent + random.uniform(0, initial / 4), cap)

    async def complete(self, messages: Messages) -> ChatReply:
        """The validated reply to ``messages``, retried; ProviderError or RunAborted if not."""
        body = orjson.dumps(
            {
                "model": self.model,
                "messages": messages,
                "temperature": 0,
                "response_format": {"type": "json_object"},
            }
        )
        started, retries = time.perf_counter(), Counter[str]()

        def count_retry(state: RetryCallState) -> None:
            exc = state.outcome.exception() if state.outcome else None
            tag = str(exc.status or exc.kind) if isinstance(exc, ProviderError) else "error"
            retries[tag] += 1
            self.retries[tag] += 1

        retrying = AsyncRetrying(
            stop=stop_after_attempt(self.max_retries + 1),
            wait=self._wait,
            retry=retry_if_exception(lambda e: isinstance(e, ProviderError) and e.retryable),
            before_sleep=count_retry,
            reraise=True,
        )
        try:
            reply: ChatReply = await retrying(self._attempt, body, math.ceil(len(body) / 4))
        except ProviderError as error:
            error.wall_ms, error.retries = (time.perf_counter() - started) * 1000, dict(retries)
            raise
        return reply

    async def _attempt(self, body: bytes, estimate: int) -> ChatReply:
        headers = {"Authorization": f"Bearer {self._key}", "Content-Type": "application/json"}
        async with self.limiter.slot(estimate) as epoch:
            started = time.perf_counter()
            try:
                with anyio.fail_after(self.timeout_s):  # the whole attempt, not each read
                    response = await self.client.post(CHAT_ENDPOINT, content=body, headers=headers)
            except (httpx.TimeoutException, TimeoutError):
                self.limiter.settle(estimate, 0)
                raise ProviderError(
                    f"no complete reply within {self.timeout_s} s", kind="timeout", retryable=True
                ) from None
            except httpx.TransportError as exc:
                self.limiter.settle(estimate, 0)
                message = self.redact(f"connection error: {type(exc).__name__}: {exc}")
                raise ProviderError(message, kind="connection", retryable=True) from None
            latency_ms = (time.perf_counter() - started) * 1000
        return self._read(response, estimate, epoch, latency_ms)

    def _read(
        self, response: httpx.Response, estimate: int, epoch: int, latency_ms: float
    ) -> ChatReply:
        request_id, status = response.headers.get("x-request-id"), response.status_code
        request_id = None if request_id is None else self.redact(request_id)
        if status != 200:
            self.limiter.settle(estimate, 0)
            message = self.redact(f"HTTP {status}: {error_message(response, self.redact)}")
            if status in (401, 403):
                raise RunAborted(f"the judge API rejected the key ({message}); check {API_KEY_ENV}")
            if status in THROTTLE_STATUSES:
                retry_after = parse_retry_after(response.headers)
                hold = None if retry_after is None else min(retry_after, RETRY_AFTER_CAP_S)
                self.limiter.on_throttled(hold, epoch)
                raise RateLimited(
                    message, status=status, retry_after=retry_after, request_id=request_id
                )
            kind = "server-error" if status >= 500 else f"http-{status}"
            retryable = status in RETRY_STATUSES
            raise ProviderError(
                message,
                kind=kind,
                status=status,
                retryable=retryable,
                request_id=request_id,
                retry_after=parse_retry_after(response.headers) if retryable else None,
            )
        try:
            reply: Any = orjson.loads(response.content)
            content = orjson.loads(reply["choices"][0]["message"]["content"])
        except (orjson.JSONDecodeError, LookupError, TypeError):
            # not settled: a malformed reply is charged at its estimate, as for Jev
            raise malformed("no JSON object in choices[0].message.content", request_id) from None
        usage, model = reply.get("usage"), reply.get("model") or self.model
        if not isinstance(content, dict) or not isinstance(model, str):
            raise malformed("content is not a JSON object, or model is not a string", request_id)
        if usage is None:
            used = TokenUsage(input_tokens=estimate, output_tokens=math.ceil(len(str(content)) / 4))
        else:
            counts = [
                usage.get(n) if isinstance(usage, dict) else None
                for n in ("prompt_tokens", "completion_tokens")
            ]
            if not all(type(n) is int and n >= 0 for n in counts):
                raise malformed("usage.prompt_tokens/completion_tokens are not counts", request_id)
            used = TokenUsage(input_tokens=cast(int, counts[0]), output_tokens=cast(int, counts[1]))
        self.limiter.settle(estimate, used.input_tokens)
        self.limiter.on_success()
        content, model = masked_json(content, self.redact), self.redact(model)  # echoed keys
        return ChatReply(content, model, used, usage is None, latency_ms, request_id)

    async def aclose(self) -> None:
        """Close the pooled connections."""
        await self.client.aclose()
