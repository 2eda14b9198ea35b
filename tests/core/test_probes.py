"""Each judge-audit probe's request is what docs/semantics.md §9 says it is."""

from __future__ import annotations

import hashlib

import anyio

from ragbatch.core import (
    FILLER,
    NEGATED,
    PROBE_VERSION,
    Call,
    Row,
    build_request,
    negated_chunk_question,
    padded,
    probe_readings,
    probe_request,
    request_key,
)
from ragbatch.core._questions import ROW_QUESTIONS, chunk_question
from ragbatch.core._wire import canonical_json
from ragbatch.providers import MockProvider

ROW = Row.model_validate(
    {
        "id": "r1",
        "question": "When did the Berlin Wall fall?",
        "contexts": [
            {"id": "c1", "text": "It fell on 9 November 1989."},
            {"id": "c2", "text": "Demolition began in June 1990."},
            {"id": "c3", "text": "Reunification came on 3 October 1990."},
        ],
        "answer": "On 9 November 1989.",
        "referenceAnswer": "9 November 1989",
        "mock": {
            "retrieval": {
                "chunkRelevance": {"c1": 0.9, "c2": 0.3, "c3": 0.1},
                "sufficiency": 0.85,
                "conflict": 0.05,
            },
            "generation": {
                "relevance": 0.95,
                "groundedness": 0.7,
                "contradiction": 0.1,
                "correctness": 0.9,
            },
        },
    }
)
# The definition of the probes, pinned: change the wording and PROBE_VERSION together.
PINNED = ("1.0.0", "2034a2db")


def test_order_reverses_the_contexts_and_keeps_their_ids_and_questions() -> None:
    original = build_request(ROW, "m")
    probe = probe_request("order", ROW, "m")
    assert [c["id"] for c in probe.state["contexts"]] == ["c3", "c2", "c1"]
    assert probe.state["contexts"] == list(reversed(original.state["contexts"]))
    assert probe.questions == original.questions
    assert probe.questions["chunkRelevance:0"] == chunk_question("c1")  # still names c1
    assert {k: v for k, v in probe.state.items() if k != "contexts"} == {
        k: v for k, v in original.state.items() if k != "contexts"
    }


def test_length_pads_the_answer_to_twice_its_length_with_the_filler() -> None:
    probe = probe_request("length", ROW, "m")
    answer = probe.state["answer"]
    assert answer.startswith(ROW.answer + " " + FILLER)
    assert 2 * len(ROW.answer) <= len(answer) < 2 * len(ROW.answer) + len(FILLER) + 1
    assert answer.removeprefix(ROW.answer).replace(FILLER, "").strip() == ""
    assert list(probe.questions) == ["answerRelevance", "groundedness", "contradiction"]
    long_answer = "x" * 1000
    padded_long = padded(long_answer)
    assert len(padded_long) >= 2000
    assert len(padded_long) - len(FILLER) - 1 < 2000  # no more filler than needed


def test_repeat_sends_the_same_bytes_under_its_own_cache_key() -> None:
    original = build_request(ROW, "m")
    probe = probe_request("repeat", ROW, "m")
    assert probe.body() == original.body()
    plain = request_key("e", original)
    marked = request_key("e", probe, "repeat")
    assert marked != plain
    assert request_key("e", probe, "repeat") == marked  # stable: a replay finds it
    payload = {
        "endpoint": "e",
        "model": "m",
        "probe": "repeat",
        "questions": {k: q.wire for k, q in original.questions.items()},
        "state": original.state,
    }
    assert marked == hashlib.sha256(canonical_json(payload)).hexdigest()


def test_complement_asks_each_judgment_in_its_negated_wording() -> None:
    probe = probe_request("complement", ROW, "m")
    assert probe.state == build_request(ROW, "m").state
    expected = {f"not:chunkRelevance:{i}" for i in range(3)}
    expected |= {f"not:{q}" for q in (*ROW_QUESTIONS, "correctness")}
    assert set(probe.questions) == expected
    assert probe.questions["not:groundedness"] == NEGATED["groundedness"]
    assert probe.questions["not:chunkRelevance:1"] == negated_chunk_question("c2")
    for qid, question in probe.questions.items():
        base = qid.removeprefix("not:")
        original = chunk_question("c1") if base.startswith("chunk") else None
        original = original or ROW_QUESTIONS.get(base)
        if original is not None and not base.startswith("chunk"):
            # the twin swaps what "true" and "false" mean
            assert isinstance(question.criteria, dict) and isinstance(original.criteria, dict)
            assert question.criteria["true"] == original.criteria["false"]
            assert question.criteria["false"] == original.criteria["true"]
    assert probe_readings("complement", {"not:groundedness": 0.25}) == {"groundedness": 0.75}


def test_the_probe_wording_is_pinned_with_its_version() -> None:
    wording = canonical_json(
        {
            "filler": FILLER,
            "negated": {k: q.wire for k, q in NEGATED.items()},
            "chunk": negated_chunk_question("ID").wire,
        }
    )
    assert (PROBE_VERSION, hashlib.sha256(wording).hexdigest()[:8]) == PINNED


def test_the_mock_answers_a_negated_twin_as_one_minus_the_original() -> None:
    provider = MockProvider()

    async def ask() -> dict[str, float]:
        request = probe_request("complement", ROW, provider.model)
        reply = await provider.fetch_answers(Call(request=request, row=ROW))
        return reply.probabilities()

    answers = anyio.run(ask)
    assert answers["not:groundedness"] == 1.0 - 0.7
    assert answers["not:chunkRelevance:0"] == 1.0 - 0.9
