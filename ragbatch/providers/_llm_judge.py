"""The ``llm`` baseline judge and an LLM claim extractor over a chat API (async I/O).

The judge sends a written rubric (the 8 diagnoses, their definitions and the precedence:
retrieval before generation) and the row, through :class:`ChatClient` (OpenAI-compatible,
``temperature: 0``, JSON reply; retries, rate limiting and key redaction live there). The
reply must be ``{"diagnosis": <one of DIAGNOSES>, "confidence": <finite number in [0, 1]>}``;
anything else is a ``malformed-response`` ProviderError: a failed baseline row, never a pass.

Bias mitigations (docs/semantics.md §7): the contexts are shown in an order shuffled by
``random.Random(f"{seed}:{row.id}")`` (position bias) and the answer is cut at ``answer_cap``
characters with a marker (verbosity bias); the prompt says both, and
:attr:`LlmJudge.mitigations` keeps, per row, the order shown and whether the answer was cut.

Verdicts are cached in the run's :class:`ReplyCache`, through the same
:class:`~ragbatch.providers.cache._replies.CachePath` as Jev's replies (leases, group commit), under
the sha256 of the canonical JSON of endpoint, model and the exact messages (so a new seed,
cap or rubric is a new key). Under ``--offline`` a verdict not cached fails as
``cache-miss``: nothing is sent. An entry
is a header line (format, checksum, key) and the verdict JSON with its answering model,
latency and usage; one that fails a check is dropped and fetched again. Errors are never cached.
"""

from __future__ import annotations

import hashlib
import math
import random
from dataclasses import dataclass
from typing import Any, cast

import orjson

from ragbatch.core import (
    DIAGNOSES,
    BaselineReply,
    Claim,
    ConfigError,
    Diagnosis,
    Row,
    TokenUsage,
    canonical_json,
)
from ragbatch.providers._chat_client import (
    API_KEY_ENV,
    CHAT_ENDPOINT,
    ChatClient,
    ChatReply,
    Messages,
    malformed,
)
from ragbatch.providers._http_types import DEFAULT_MAX_RESPONSE_BYTES
from ragbatch.providers._ratelimit import RateLimiter
from ragbatch.providers.cache import CacheMode, CachePath, CacheStats, ReplyCache

__all__ = [
    "API_KEY_ENV",
    "CAP_MARKER",
    "ChatClient",
    "ChatReply",
    "LlmClaimExtractor",
    "LlmJudge",
    "Mitigation",
    "build_messages",
    "parse_verdict",
    "verdict_key",
]

ENTRY_FORMAT = 1
CAP_MARKER = " [answer cut: first {cap} of {total} characters shown]"

RUBRIC = """You are a strict evaluator of one retrieval-augmented generation (RAG) interaction.
Diagnose it with exactly one label. Check the labels in this order and report the FIRST that
applies (retrieval problems before generation problems):
1. CONFLICTING_EVIDENCE: the retrieved contexts contradict each other on what the question asks.
2. RETRIEVAL_MISS: no context is relevant to the question (or nothing was retrieved).
3. RETRIEVAL_INSUFFICIENT: contexts are relevant but together do not contain enough to answer.
4. ANSWER_IRRELEVANT: the answer does not address the question.
5. GENERATOR_UNGROUNDED: the answer states things the contexts do not support, or contradicts them.
6. ANSWER_INCORRECT: a reference answer is given and the answer disagrees with it.
7. JUDGE_UNCERTAIN: you cannot decide between the labels above and PASS.
8. PASS: relevant, sufficient, consistent contexts and a relevant, grounded (and, with a
   reference, correct) answer.
Judge against this rubric, not by style or length: a longer answer is not a better one. The
contexts are listed in random order; their position is not evidence. An answer may be cut
at a marker; judge only the part shown.
Reply with a JSON object only: {"diagnosis": "<one label above>", "confidence": <number from 0
to 1, your probability that the label is right>}."""

CLAIMS_PROMPT = """Split the ANSWER into atomic factual claims. Copy each claim's text verbatim
from the answer (an exact substring, no rewording). For each claim list the ids of the contexts
that support it (may be empty). Reply with a JSON object only:
{"claims": [{"text": "<exact substring of the answer>", "citations": ["<context id>", ...]}]}"""


@dataclass(frozen=True, slots=True)
class Mitigation:
    """What the judge was shown of a row: context ids in shown order, answer length and cap."""

    context_order: tuple[str, ...]
    answer_chars: int
    answer_capped: bool


def build_messages(row: Row, seed: int, answer_cap: int) -> tuple[Messages, Mitigation]:
    """The judge's messages for ``row`` (contexts shuffled per seed and row, answer capped)."""
    contexts = list(row.contexts)
    random.Random(f"{seed}:{row.id}").shuffle(contexts)
    answer, capped = row.answer, len(row.answer) > answer_cap
    if capped:
        answer = answer[:answer_cap] + CAP_MARKER.format(cap=answer_cap, total=len(row.answer))
    shown = "\n\n".join(f"[{c.id}]\n{c.text}" for c in contexts) or "(none retrieved)"
    parts = [
        f"QUESTION:\n{row.question}",
        f"CONTEXTS (random order):\n{shown}",
        f"ANSWER:\n{answer}",
    ]
    if row.reference_answer is not None:
        parts.append(f"REFERENCE ANSWER:\n{row.reference_answer}")
    messages = [
        {"role": "system", "content": RUBRIC},
        {"role": "user", "content": "\n\n".join(parts)},
    ]
    return messages, Mitigation(tuple(c.id for c in contexts), len(row.answer), capped)


def verdict_key(model: str, messages: Messages) -> str:
    """Content address of a judge call: endpoint, model and the exact messages."""
    payload = {"endpoint": CHAT_ENDPOINT, "model": model, "messages": messages}
    return hashlib.sha256(canonical_json(payload)).hexdigest()


def _is_probability(value: object) -> bool:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    return ok and math.isfinite(cast(float, value)) and 0.0 <= cast(float, value) <= 1.0


def parse_verdict(
    content: dict[str, Any], request_id: str | None = None
) -> tuple[Diagnosis, float]:
    """Diagnosis and confidence from the judge's JSON; ``malformed-response`` otherwise."""
    diagnosis, confidence = content.get("diagnosis"), content.get("confidence")
    if not isinstance(diagnosis, str) or diagnosis not in DIAGNOSES:
        raise malformed(f"diagnosis {str(diagnosis)[:40]!r} is not one of {DIAGNOSES}", request_id)
    if not _is_probability(confidence):
        raise malformed(f"confidence {str(confidence)[:40]} is not a number in [0, 1]", request_id)
    return cast(Diagnosis, diagnosis), float(cast(float, confidence))


def encode_verdict(reply: BaselineReply, key: str) -> bytes:
    """Header line (format, body checksum, key), then the verdict JSON; never the API key."""
    body = canonical_json(
        {
            "diagnosis": reply.diagnosis,
            "confidence": reply.confidence,
            "model": reply.model,
            "latencyMs": reply.latency_ms,
            "usage": [reply.usage.input_tokens, reply.usage.output_tokens],
            "estimated": reply.estimated,
        }
    )
    head = {"format": ENTRY_FORMAT, "kind": "llm-verdict", "key": key}
    return orjson.dumps({**head, "sha256": hashlib.sha256(body).hexdigest()}) + b"\n" + body


def decode_verdict(data: bytes, key: str) -> BaselineReply:
    """Parse and verify an entry written by :func:`encode_verdict`; ValueError if untrusted."""
    head, _, body = data.partition(b"\n")
    meta, value = orjson.loads(head), orjson.loads(body)
    if not isinstance(meta, dict) or meta.get("format") != ENTRY_FORMAT:
        raise ValueError("unknown entry format")
    if meta.get("key") != key or hashlib.sha256(body).hexdigest() != meta.get("sha256"):
        raise ValueError("checksum or key mismatch")
    diagnosis, confidence = parse_verdict(value)
    usage, latency = value["usage"], value["latencyMs"]
    if not isinstance(latency, float | int) or not math.isfinite(latency) or latency < 0:
        raise ValueError("bad latency")
    return BaselineReply(
        diagnosis=diagnosis,
        confidence=confidence,
        model=str(value["model"]),
        latency_ms=float(latency),
        usage=TokenUsage(input_tokens=usage[0], output_tokens=usage[1]),
        estimated=value["estimated"] is True,
    )


class LlmJudge:
    """``BaselineJudge`` asking an LLM for the diagnosis under the written rubric."""

    name = "llm"

    def __init__(
        self,
        base_url: str,
        api_key: str,
        model: str,
        cache: ReplyCache | None,
        limiter: RateLimiter,
        *,
        seed: int = 0,
        answer_cap: int = 2000,
        timeout_s: float = 30,
        max_retries: int = 4,
        backoff_initial_s: float = 0.5,
        backoff_max_s: float = 5.0,
        allow_insecure_http: bool = False,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        tls_verify: bool | str = True,
        close_cache: bool = False,
    ) -> None:
        if answer_cap < 1:
            raise ConfigError(
                f"the judge's answer cap must be at least 1 character, not {answer_cap}"
            )
        self.chat = ChatClient(
            base_url, api_key, model, limiter, timeout_s=timeout_s, max_retries=max_retries,
            backoff_initial_s=backoff_initial_s, backoff_max_s=backoff_max_s,
            allow_insecure_http=allow_insecure_http, max_response_bytes=max_response_bytes,
            tls_verify=tls_verify,
        )  # fmt: skip
        self.model, self.cache, self.seed, self.answer_cap = model, cache, seed, answer_cap
        self.close_cache = close_cache  # the cache was opened for this judge: closed with it
        # The same cache path as Jev's replies (leases, group commit); a read-only cache is
        # an --offline replay: a verdict not in it fails as cache-miss, nothing is sent.
        self.path: CachePath[BaselineReply] | None = None
        if cache is not None:
            mode: CacheMode = "offline" if cache.read_only else "use"
            self.path = CachePath(cache, mode, "judge cache")
        self.stats = self.path.stats if self.path is not None else CacheStats()
        self.warnings: list[str] = self.path.warnings if self.path is not None else []
        self.mitigations: dict[str, Mitigation] = {}  # per row id: order shown, answer cap

    def _hit(self, hit: BaselineReply) -> BaselineReply:
        self.stats.hits += 1
        self.stats.saved_input_tokens += hit.usage.input_tokens
        return hit

    async def _ask(self, messages: Messages) -> BaselineReply:
        reply = await self.chat.complete(messages)
        diagnosis, confidence = parse_verdict(reply.content, reply.request_id)
        return BaselineReply(
            diagnosis, confidence, reply.model, reply.latency_ms, reply.usage, reply.estimated
        )

    async def judge(self, row: Row) -> BaselineReply:
        """The LLM's verdict (cached by content), or ProviderError: a failed baseline row."""
        messages, self.mitigations[row.id] = build_messages(row, self.seed, self.answer_cap)
        if self.path is None:
            self.stats.misses += 1
            return await self._ask(messages)
        key = verdict_key(self.model, messages)
        return await self.path.fetch(
            key,
            lambda data: decode_verdict(data, key),
            lambda verdict: encode_verdict(verdict, key),
            lambda: self._ask(messages),
            self._hit,
        )

    async def aclose(self) -> None:
        """Close the HTTP client, and the cache if it was opened for this judge
        (``close_cache``; else it belongs to the caller): its leases go with it."""
        try:
            await self.chat.aclose()
        finally:
            if self.close_cache and self.cache is not None:
                self.cache.close()


class LlmClaimExtractor:
    """Claims from an LLM: the ``ClaimExtractor`` shape, but async (``extract_async``).

    Only claims whose text is an exact substring of the answer are kept (offsets found in
    order of appearance); citations that are not context ids of the row are dropped. Used by
    the runner with ``--groundedness claims --claim-extractor llm``. It has no cache of its own,
    so a rerun extracts again (and may get other claims): for reproducible runs, store the
    claims in the dataset (``claims``) and use ``provided``.
    """

    name = "llm"

    def __init__(self, chat: ChatClient) -> None:
        self.chat = chat
        self.dropped = 0  # claims whose text was not found verbatim in the answer

    async def aclose(self) -> None:
        await self.chat.aclose()

    async def extract_async(self, row: Row) -> list[Claim]:
        """The row's claims, or ProviderError (``malformed-response`` for a bad claim list)."""
        shown = "\n\n".join(f"[{c.id}]\n{c.text}" for c in row.contexts) or "(none)"
        user = f"CONTEXTS:\n{shown}\n\nANSWER:\n{row.answer}"
        messages = [{"role": "system", "content": CLAIMS_PROMPT}, {"role": "user", "content": user}]
        reply = await self.chat.complete(messages)
        items = reply.content.get("claims")
        if not isinstance(items, list):
            raise malformed("no claims list", reply.request_id)
        known, claims, cursor = {c.id for c in row.contexts}, list[Claim](), 0
        for item in items:
            text = item.get("text") if isinstance(item, dict) else None
            cited = item.get("citations", []) if isinstance(item, dict) else None
            if not isinstance(text, str) or not isinstance(cited, list):
                raise malformed("a claim needs a text and a citations list", reply.request_id)
            start = row.answer.find(text, cursor) if text else -1
            start = row.answer.find(text) if start < 0 and text else start
            if start < 0:
                self.dropped += 1
                continue
            cursor = start + len(text)
            citations = [c for c in cited if isinstance(c, str) and c in known]
            claims.append(
                Claim(
                    id=f"x{len(claims) + 1}",
                    text=text,
                    start=start,
                    end=cursor,
                    citations=citations,
                )
            )
        return claims
