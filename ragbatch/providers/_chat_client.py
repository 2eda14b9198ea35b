"""A client for OpenAI-compatible ``POST {base}/v1/chat/completions`` with JSON replies (async I/O).

Shared by the ``llm`` baseline judge and the LLM claim extractor. ``base`` is the URL without
``/v1`` (e.g. ``https://api.openai.com``). Every request asks for ``temperature: 0`` and a
JSON-object reply. The HTTP call goes through the one retrying client
(:mod:`ragbatch.providers._http_client`), as for Jev: 408, 429, 5xx, connection errors and timeouts are
retried with capped exponential backoff and jitter, ``retry-after-ms`` / ``Retry-After``
honoured; 401/403 abort the run; anything else is a failed call. A 200 whose
``choices[0].message.content`` is not a JSON object, or whose usage is not a pair of counts, is
a ``malformed-response`` ProviderError (never retried). The key, read by the caller from
``RAGBATCH_JUDGE_API_KEY``, is sent only in the ``Authorization`` header and redacted from
every error message.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Any, cast

import orjson

from ragbatch.core import ProviderError, TokenUsage
from ragbatch.providers._apikey import Redactor, check_base_url, clean_key, masked_json
from ragbatch.providers._http_client import (
    DEFAULT_MAX_RESPONSE_BYTES,
    Policy,
    RetryingClient,
    Service,
)
from ragbatch.providers._ratelimit import RateLimiter
from ragbatch.providers._replies import HttpReply

API_KEY_ENV = "RAGBATCH_JUDGE_API_KEY"
CHAT_ENDPOINT = "/v1/chat/completions"
RETRY_AFTER_CAP_S = 60.0
CHAT = Service("the judge API", API_KEY_ENV, "x-request-id", "--judge-base-url")
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
    """``/v1/chat/completions`` through the one retrying HTTP client: limiter, retries,
    redaction; this class builds the body and validates the reply."""

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
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        tls_verify: bool | str = True,
    ) -> None:
        self.redact = Redactor(api_key)  # the key as given; trimmed and checked before use
        key = clean_key(api_key, API_KEY_ENV, "judge API key")
        check_base_url(base_url, "--judge-base-url", allow_insecure_http=allow_insecure_http)
        self.model, self.limiter = model, limiter
        policy = Policy(
            attempt_timeout_s=timeout_s,
            max_retries=max_retries,
            backoff_initial_s=backoff_initial_s,
            backoff_max_s=backoff_max_s,
            retry_after_cap_s=RETRY_AFTER_CAP_S,
            max_response_bytes=max_response_bytes,
            verify=tls_verify,
        )
        self.client = RetryingClient(base_url, key, limiter, policy, CHAT, self.redact)

    @property
    def retries(self) -> Counter[str]:
        """Retries by status or failure kind, over the client's life."""
        return self.client.retries

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
        estimate = math.ceil(len(body) / 4)
        outcome = await self.client.call(
            CHAT_ENDPOINT, body, estimate, lambda reply: self._read(reply, estimate)
        )
        reply = outcome.value
        return ChatReply(
            reply.content, reply.model, reply.usage, reply.estimated, outcome.latency_ms,
            reply.request_id,
        )  # fmt: skip

    def _read(self, response: HttpReply, estimate: int) -> tuple[ChatReply, int]:
        request_id = response.headers.get(CHAT.request_id_header)
        request_id = None if request_id is None else self.redact(request_id)
        try:
            reply: Any = orjson.loads(response.body)
            content = orjson.loads(reply["choices"][0]["message"]["content"])
        except (orjson.JSONDecodeError, LookupError, TypeError):
            # not retried, and charged at its estimate, as for Jev
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
        content, model = masked_json(content, self.redact), self.redact(model)  # echoed keys
        value = ChatReply(content, model, used, usage is None, 0.0, request_id)
        return value, used.input_tokens

    async def aclose(self) -> None:
        """Close the pooled connections."""
        await self.client.aclose()
