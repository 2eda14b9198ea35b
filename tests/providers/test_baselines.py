"""Baseline judges: ``lexical`` hand cases, and ``llm`` against a fake chat server on loopback.

The LLM judge is checked for what it sends (rubric, shuffled contexts, capped answer, bearer
key), what it accepts (only a valid verdict: anything else is a ``malformed-response`` failure,
never a pass), retries (429 with Retry-After, 5xx), aborts (401), key redaction and caching.
"""

from __future__ import annotations

import math
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import orjson
import pytest

from ragbatch.core._errors import ConfigError, ProviderError, RunAborted
from ragbatch.core._pricing import parse_pricing
from ragbatch.core._provider import BaselineJudge
from ragbatch.core._schema import DIAGNOSES, Context, Row, TokenUsage
from ragbatch.providers._baseline import RecordedBaseline
from ragbatch.providers._lexical import (
    LEXICAL_MODEL,
    LexicalBaseline,
    LexicalScores,
    coverage,
    diagnose,
    score_row,
    tokens,
)
from ragbatch.providers._llm_judge import (
    CAP_MARKER,
    ChatClient,
    LlmClaimExtractor,
    LlmJudge,
    build_messages,
    verdict_key,
)
from ragbatch.providers._ratelimit import RateLimiter
from ragbatch.providers.cache._replies import ReplyCache
from ragbatch.testing.chat_server import ChatFault, ChatServer

ROOT = Path(__file__).resolve().parents[2]
KEY = "sk-judge-secret-7d41e9"
MODEL = "fake-judge-1"


def make_row(
    row_id: str = "r1",
    question: str = "When did the Berlin Wall fall?",
    contexts: tuple[str, ...] = ("The Berlin Wall fell on 9 November 1989.",),
    answer: str = "The Berlin Wall fell on 9 November 1989.",
    reference: str | None = None,
) -> Row:
    """A row with contexts ``c1..cN``."""
    return Row(
        id=row_id,
        question=question,
        contexts=[Context(id=f"c{i + 1}", text=t) for i, t in enumerate(contexts)],
        answer=answer,
        reference_answer=reference,
    )


# -- lexical ---------------------------------------------------------------------------------------


def test_tokens_drop_case_punctuation_and_stop_words() -> None:
    assert tokens("The Wall, the WALL; of 1989!") == {"wall", "1989"}
    assert coverage(frozenset({"a", "b"}), frozenset({"b", "c"})) == 0.5
    assert coverage(frozenset(), frozenset({"b"})) == 0.0


@pytest.mark.parametrize(
    ("row", "diagnosis", "confidence"),
    [
        # question {berlin, wall, fall}: "fall" is not "fell" (no stemming), so retrieval 2/3
        # is the smallest margin: 0.5 + 0.5 * (2/3 - 0.25) / 0.75
        (make_row(reference="9 November 1989"), "PASS", 0.5 + 0.5 * (2 / 3 - 0.25) / 0.75),
        (make_row(question="Berlin Wall fell when?", reference="1989"), "PASS", 1.0),
        (make_row(contexts=()), "RETRIEVAL_MISS", 1.0),
        # question {capital, australia}: no context word shared
        (
            make_row(question="Capital of Australia?", contexts=("Bananas are yellow.",)),
            "RETRIEVAL_MISS",
            1.0,
        ),
        # retrieval fine; answer {wall, fell, 1991, soviet, tanks}: 2 of 5 in the context
        (
            make_row(answer="The wall fell in 1991 with Soviet tanks."),
            "GENERATOR_UNGROUNDED",
            0.5 + 0.5 * (0.5 - 0.4) / 0.5,
        ),
        # grounded, but reference {3, october, 1990} is absent from the answer
        (make_row(reference="3 October 1990"), "ANSWER_INCORRECT", 1.0),
    ],
)
def test_lexical_hand_cases(row: Row, diagnosis: str, confidence: float) -> None:
    got, conf = diagnose(score_row(row))
    assert got == diagnosis
    assert conf == pytest.approx(confidence)


def test_lexical_thresholds_pass_at_equality_and_order_checks() -> None:
    # retrieval exactly at 0.25 passes with margin 0; retrieval is checked before grounding
    assert diagnose(LexicalScores(0.25, 1.0, None)) == ("PASS", 0.5)
    assert diagnose(LexicalScores(0.2, 0.0, 0.0))[0] == "RETRIEVAL_MISS"
    assert diagnose(LexicalScores(1.0, 0.4, 0.0))[0] == "GENERATOR_UNGROUNDED"
    assert diagnose(LexicalScores(1.0, 1.0, None)) == ("PASS", 1.0)


@pytest.mark.anyio
async def test_lexical_reply_is_free_and_instant() -> None:
    judge: BaselineJudge = LexicalBaseline()
    reply = await judge.judge(make_row())
    assert (reply.model, reply.latency_ms, reply.usage, reply.estimated) == (
        LEXICAL_MODEL,
        0.0,
        TokenUsage(input_tokens=0, output_tokens=0),
        False,
    )
    assert judge.name == "lexical"
    await LexicalBaseline().aclose()
    await RecordedBaseline().aclose()


def test_judge_models_are_priced() -> None:
    snapshot = parse_pricing((ROOT / "pricing/typesafe-2026-12.json").read_bytes(), "pricing")
    for model in (LEXICAL_MODEL, MODEL, "gpt-4o-mini-2024-07-18", "gpt-4.1"):
        assert snapshot.price_for(model) is not None, model
    assert snapshot.price_for(LEXICAL_MODEL) == snapshot.price_for("lexical-baseline")


# -- LLM judge against the fake chat server -------------------------------------------------------


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    """A fake chat server on a random loopback port accepting ``KEY``."""
    with ChatServer(api_key=KEY) as server:
        yield server


@asynccontextmanager
async def open_judge(
    server: ChatServer, cache: ReplyCache | None = None, **options: Any
) -> AsyncIterator[LlmJudge]:
    """An LlmJudge with tiny backoff, closed afterwards."""
    options = {"api_key": KEY, "max_retries": 3, **options}
    judge = LlmJudge(
        server.base_url,
        model=MODEL,
        cache=cache,
        limiter=RateLimiter(4),
        backoff_initial_s=0.01,
        backoff_max_s=0.05,
        timeout_s=5,
        **options,
    )
    try:
        yield judge
    finally:
        await judge.aclose()


@pytest.mark.anyio
async def test_verdict_usage_model_and_request(chat: ChatServer) -> None:
    async with open_judge(chat) as judge:
        reply = await judge.judge(make_row(reference="9 November 1989"))
    assert (reply.diagnosis, reply.confidence, reply.model) == ("PASS", 0.9, MODEL)
    assert reply.usage.input_tokens > 0 and reply.usage.output_tokens > 0
    assert reply.latency_ms > 0 and not reply.estimated
    body = chat.bodies[0]
    assert body["model"] == MODEL and body["temperature"] == 0
    assert body["response_format"] == {"type": "json_object"}
    system, user = body["messages"]
    assert all(d in system["content"] for d in DIAGNOSES)
    assert "REFERENCE ANSWER:\n9 November 1989" in user["content"]


@pytest.mark.anyio
async def test_diagnosis_follows_the_reply(chat: ChatServer) -> None:
    async with open_judge(chat) as judge:
        reply = await judge.judge(make_row(answer="UNGROUNDED claim about walls"))
    assert (reply.diagnosis, reply.confidence) == ("GENERATOR_UNGROUNDED", 0.8)


@pytest.mark.anyio
async def test_429_with_retry_after_then_success(chat: ChatServer) -> None:
    chat.push(ChatFault("status", status=429, retry_after="0.2"), ChatFault("status", status=500))
    started = time.perf_counter()
    async with open_judge(chat) as judge:
        reply = await judge.judge(make_row())
    assert time.perf_counter() - started >= 0.2  # Retry-After honoured (backoff is 10 ms)
    assert reply.diagnosis == "PASS"
    assert chat.requests_total == 3
    assert chat.responses_by_status == {429: 1, 500: 1, 200: 1}
    assert judge.chat.retries == {"429": 1, "500": 1}


@pytest.mark.anyio
@pytest.mark.parametrize(
    "kind", ["malformed_content", "unknown_diagnosis", "bad_confidence", "missing_choices"]
)
async def test_bad_reply_is_a_failure_not_a_pass(
    chat: ChatServer, kind: Any, tmp_path: Path
) -> None:
    chat.push(ChatFault(kind))
    cache = ReplyCache(tmp_path / "cache")
    async with open_judge(chat, cache) as judge:
        with pytest.raises(ProviderError) as caught:
            await judge.judge(make_row())
    assert caught.value.kind == "malformed-response"
    assert chat.requests_total == 1  # not retried
    assert len(cache) == 0  # errors are never cached
    cache.close()


@pytest.mark.anyio
async def test_reply_without_usage_is_estimated(chat: ChatServer) -> None:
    chat.push(ChatFault("missing_usage"))
    async with open_judge(chat) as judge:
        reply = await judge.judge(make_row())
    assert reply.estimated and reply.usage.input_tokens > 0


@pytest.mark.anyio
async def test_retries_stop_after_max_retries(chat: ChatServer) -> None:
    chat.push(*[ChatFault("status", status=503)] * 3)
    async with open_judge(chat, max_retries=2) as judge:
        with pytest.raises(ProviderError) as caught:
            await judge.judge(make_row())
    assert (caught.value.kind, caught.value.status, caught.value.retries) == (
        "server-error",
        503,
        {"503": 2},
    )


@pytest.mark.anyio
async def test_rejected_key_aborts_and_is_never_shown(chat: ChatServer) -> None:
    wrong = "sk-wrong-key-0b6c33"
    async with open_judge(chat, api_key=wrong) as judge:
        with pytest.raises(RunAborted) as caught:
            await judge.judge(make_row())
    text = f"{caught.value} {caught.value!r}"
    assert "401" in text and "RAGBATCH_JUDGE_API_KEY" in text
    assert wrong not in text and "***" in text  # the server echoed it; the client redacted it
    assert chat.requests_total == 1


@pytest.mark.anyio
async def test_connection_error_does_not_show_the_key(chat: ChatServer) -> None:
    base = chat.base_url
    chat.stop()
    judge = LlmJudge(base, KEY, MODEL, None, RateLimiter(1), max_retries=1, backoff_initial_s=0.01)
    try:
        with pytest.raises(ProviderError) as caught:
            await judge.judge(make_row())
    finally:
        await judge.aclose()
    assert caught.value.kind == "connection" and KEY not in str(caught.value)


def test_missing_key_or_bad_cap_is_refused() -> None:
    with pytest.raises(RunAborted, match="RAGBATCH_JUDGE_API_KEY"):
        LlmJudge("http://127.0.0.1:9", "", MODEL, None, RateLimiter(1))
    with pytest.raises(ConfigError, match="answer cap"):
        LlmJudge("http://127.0.0.1:9", KEY, MODEL, None, RateLimiter(1), answer_cap=0)


@pytest.mark.anyio
async def test_cache_hit_sends_nothing_and_keeps_recorded_cost(
    chat: ChatServer, tmp_path: Path
) -> None:
    cache = ReplyCache(tmp_path / "cache")
    row = make_row(answer="UNGROUNDED text")
    async with open_judge(chat, cache) as judge:
        first = await judge.judge(row)
    async with open_judge(chat, cache) as judge:
        second = await judge.judge(row)
        assert (judge.stats.hits, judge.stats.misses) == (1, 0)
    assert chat.requests_total == 1
    assert second == first
    keys = cache.keys()
    stored = b"".join(cache.get(k) or b"" for k in keys)
    assert KEY.encode() not in stored
    cache.close()


@pytest.mark.anyio
async def test_corrupt_cache_entry_is_dropped_and_refetched(
    chat: ChatServer, tmp_path: Path
) -> None:
    cache = ReplyCache(tmp_path / "cache")
    row = make_row()
    messages, _ = build_messages(row, 0, 2000)
    key = verdict_key(MODEL, messages)
    cache.put(key, b'{"format":1}\n{"diagnosis":"PASS"}')
    async with open_judge(chat, cache) as judge:
        reply = await judge.judge(row)
        assert judge.stats.corrupt == 1 and judge.warnings
    assert reply.diagnosis == "PASS" and chat.requests_total == 1
    cache.close()


def test_cache_key_depends_on_model_and_messages() -> None:
    row = make_row()
    a, _ = build_messages(row, 0, 2000)
    b, _ = build_messages(row, 1, 10)
    assert verdict_key(MODEL, a) == verdict_key(MODEL, build_messages(row, 0, 2000)[0])
    assert verdict_key(MODEL, a) != verdict_key(MODEL, b)
    assert verdict_key(MODEL, a) != verdict_key("other-model", a)


def test_context_shuffle_is_deterministic_per_seed_and_row() -> None:
    texts = tuple(f"passage number {i}" for i in range(8))
    rows = [make_row(row_id=f"row-{i}", contexts=texts) for i in range(6)]
    orders = [build_messages(r, 7, 2000)[1].context_order for r in rows]
    assert orders == [build_messages(r, 7, 2000)[1].context_order for r in rows]
    assert len(set(orders)) > 1  # differs across rows
    assert all(sorted(o) == sorted(f"c{i + 1}" for i in range(8)) for o in orders)
    assert build_messages(rows[0], 8, 2000)[1].context_order != orders[0]
    user = build_messages(rows[0], 7, 2000)[0][1]["content"]
    positions = [user.index(f"[{cid}]") for cid in orders[0]]
    assert positions == sorted(positions)  # the prompt shows the recorded order


@pytest.mark.anyio
async def test_answer_cap_is_applied_and_recorded(chat: ChatServer) -> None:
    answer = "word " * 100  # 500 characters
    async with open_judge(chat, answer_cap=50) as judge:
        await judge.judge(make_row(row_id="long", answer=answer))
        await judge.judge(make_row(row_id="short", answer="short"))
        assert judge.mitigations["long"].answer_capped
        assert judge.mitigations["long"].answer_chars == 500
        assert not judge.mitigations["short"].answer_capped
    sent = chat.bodies[0]["messages"][1]["content"]
    marker = CAP_MARKER.format(cap=50, total=500)
    assert f"ANSWER:\n{answer[:50]}{marker}" in sent
    assert answer[:51] not in sent
    assert "ANSWER:\nshort" in chat.bodies[1]["messages"][1]["content"]


# -- LLM claim extractor ---------------------------------------------------------------------------


@pytest.mark.anyio
async def test_claim_extractor_keeps_exact_substrings_only() -> None:
    answer = "The wall fell in 1989. It was in Berlin. It was in Berlin."
    claims_json = {
        "claims": [
            {"text": "The wall fell in 1989.", "citations": ["c1", "c9"]},
            {"text": "The wall collapsed in 1989.", "citations": ["c1"]},  # reworded: dropped
            {"text": "It was in Berlin.", "citations": []},
            {"text": "It was in Berlin."},
        ]
    }
    with ChatServer(api_key=KEY, content_fn=lambda body: orjson.dumps(claims_json).decode()) as s:
        client = ChatClient(s.base_url, KEY, MODEL, RateLimiter(1), backoff_initial_s=0.01)
        extractor = LlmClaimExtractor(client)
        try:
            claims = await extractor.extract_async(make_row(answer=answer))
        finally:
            await client.aclose()
    assert [(c.id, c.text, c.start, c.end, c.citations) for c in claims] == [
        ("x1", "The wall fell in 1989.", 0, 22, ["c1"]),
        ("x2", "It was in Berlin.", 23, 40, []),
        ("x3", "It was in Berlin.", 41, 58, []),
    ]
    assert all(answer[c.start : c.end] == c.text for c in claims if c.start is not None)
    assert extractor.dropped == 1


@pytest.mark.anyio
async def test_claim_extractor_rejects_a_bad_claim_list() -> None:
    with ChatServer(api_key=KEY, content_fn=lambda body: '{"claims": "none"}') as server:
        client = ChatClient(server.base_url, KEY, MODEL, RateLimiter(1))
        try:
            with pytest.raises(ProviderError) as caught:
                await LlmClaimExtractor(client).extract_async(make_row())
        finally:
            await client.aclose()
    assert caught.value.kind == "malformed-response"
    assert math.isfinite(caught.value.wall_ms)
