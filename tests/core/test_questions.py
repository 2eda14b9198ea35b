"""Questions: row -> one Jev request, decision variants, request keys, token estimates."""

from __future__ import annotations

import hashlib
from typing import Any

import orjson
import pytest

from ragbatch.core._questions import (
    CHUNK_PREFIX,
    CORRECTNESS_QUESTION,
    DECISION_IDS,
    DECISION_VERSION,
    ROW_QUESTIONS,
    build_request,
    build_state,
    chunk_question,
    decision_for,
    estimate_input_tokens,
    read_judgments,
    report_variant,
)
from ragbatch.core._schema import Row
from ragbatch.core._wire import JevRequest, canonical_json, request_key

ROW_IDS = [
    "contextSufficiency",
    "contextConflict",
    "answerRelevance",
    "groundedness",
    "contradiction",
]


def make_row(**overrides: Any) -> Row:
    """A valid dataset row (parsed from JSON, as the dataset reader does)."""
    doc: dict[str, Any] = {
        "id": "r1",
        "question": "When did the Berlin Wall fall?",
        "contexts": [
            {"id": "c1", "text": "On 9 November 1989 crowds breached the Berlin Wall."},
            {"id": "c2", "text": "Demolition began in June 1990."},
        ],
        "answer": "On 9 November 1989.",
    }
    doc.update(overrides)
    return Row.model_validate_json(orjson.dumps(doc))


def with_reference(**overrides: Any) -> Row:
    return make_row(referenceAnswer="9 November 1989", **overrides)


# -- build_request --------------------------------------------------------------------------------


def test_one_chunk_question_per_context() -> None:
    contexts = [{"id": f"ctx-{i}", "text": f"passage {i}"} for i in range(4)]
    request = build_request(make_row(contexts=contexts), "jev-latest")
    chunk_ids = [q for q in request.questions if q.startswith(CHUNK_PREFIX)]
    assert chunk_ids == [f"{CHUNK_PREFIX}{i}" for i in range(4)]
    for i in range(4):
        question = request.questions[f"{CHUNK_PREFIX}{i}"]
        assert question == chunk_question(f"ctx-{i}")
        assert f"'ctx-{i}'" in question.instructions
        assert question.type == "noul"
    assert request.model == "jev-latest"


def test_no_contexts_no_chunk_questions() -> None:
    request = build_request(make_row(contexts=[]), "jev-latest")
    assert sorted(request.questions) == sorted(ROW_IDS)
    assert request.state["contexts"] == []


def test_row_questions_always_asked() -> None:
    request = build_request(make_row(), "m")
    for qid in ROW_IDS:
        assert request.questions[qid] == ROW_QUESTIONS[qid]
    assert all(q.type == "noul" for q in request.questions.values())


def test_correctness_only_with_a_reference_answer() -> None:
    without = build_request(make_row(), "m")
    assert "correctness" not in without.questions
    assert len(without.questions) == 2 + 5
    with_ref = build_request(with_reference(), "m")
    assert with_ref.questions["correctness"] == CORRECTNESS_QUESTION
    assert len(with_ref.questions) == 2 + 5 + 1


def test_empty_reference_answer_is_still_a_reference() -> None:
    request = build_request(make_row(referenceAnswer=""), "m")
    assert "correctness" in request.questions
    assert request.state["referenceAnswer"] == ""


def test_state_holds_only_what_the_questions_may_see() -> None:
    row = make_row()
    assert build_request(row, "m").state == {
        "question": row.question,
        "contexts": [
            {"id": "c1", "text": row.contexts[0].text},
            {"id": "c2", "text": row.contexts[1].text},
        ],
        "answer": row.answer,
    }
    ref = with_reference()
    assert set(build_request(ref, "m").state) == {
        "question",
        "contexts",
        "answer",
        "referenceAnswer",
    }
    assert build_request(ref, "m").state["referenceAnswer"] == "9 November 1989"


MARKERS = [
    "CONFLICTING_EVIDENCE",  # expected diagnosis
    "0.123456789",  # mock probabilities
    "0.987654321",
    "MARKER-baseline-model-7f3a",
    "0.24681357",  # baseline confidence
    "4242.4242",  # baseline latency
    "8675309",  # baseline usage
    "MARKER-metadata-value-91c2",
    "MARKER-metadata-key-44d0",
]


def leaky_row() -> Row:
    """A reference row whose label, mock, baseline and metadata blocks hold unique markers."""
    return with_reference(
        expected={
            "diagnosis": "CONFLICTING_EVIDENCE",
            "retrieval": {"chunkRelevance": {"c1": True, "c2": False}, "contextConflict": True},
            "generation": {"correctness": True, "groundedness": False},
        },
        mock={
            "retrieval": {"chunkRelevance": {"c1": 0.123456789, "c2": 0.123456789}},
            "generation": {"relevance": 0.987654321, "correctness": 0.987654321},
        },
        baseline={
            "diagnosis": "CONFLICTING_EVIDENCE",
            "confidence": 0.24681357,
            "model": "MARKER-baseline-model-7f3a",
            "latencyMs": 4242.4242,
            "usage": {"inputTokens": 8675309, "outputTokens": 8675309},
        },
        metadata={
            "topic": "MARKER-metadata-value-91c2",
            "MARKER-metadata-key-44d0": ["MARKER-metadata-value-91c2"],
        },
    )


@pytest.mark.parametrize("marker", MARKERS)
def test_labels_mock_baseline_and_metadata_never_reach_the_judge(marker: str) -> None:
    row = leaky_row()
    body = build_request(row, "jev-latest").body()
    assert marker.encode() not in body
    assert marker.encode() not in canonical_json(build_state(row))


def test_block_names_never_reach_the_judge() -> None:
    body = build_request(leaky_row(), "jev-latest").body()
    for name in (b"expected", b"mock", b"baseline", b"golden", b"metadata", b'"id":"r1"'):
        assert name not in body


def test_leaky_row_asks_the_same_as_a_clean_row() -> None:
    clean = with_reference()
    assert build_request(leaky_row(), "m") == build_request(clean, "m")


# -- decisions ------------------------------------------------------------------------------------


def test_decision_variant_follows_the_reference() -> None:
    with_ref, without = decision_for(with_reference()), decision_for(make_row())
    assert with_ref.variant == "with-reference"
    assert without.variant == "without-reference"
    assert with_ref.decision_id == DECISION_IDS["with-reference"]
    assert without.decision_id == DECISION_IDS["without-reference"]
    assert with_ref.decision_id != without.decision_id
    assert with_ref.version == without.version == DECISION_VERSION


@pytest.mark.parametrize(
    ("variants", "expected"),
    [
        ({"with-reference", "without-reference"}, "mixed"),
        ({"with-reference"}, "with-reference"),
        ({"without-reference"}, "without-reference"),
        (set(), "none"),
    ],
)
def test_report_variant(variants: set[str], expected: str) -> None:
    assert report_variant(variants) == expected


# question wording changed: bump DECISION_VERSION and update this hash
DEFINITIONS_SHA256 = "fe87eb8aa0f7fd3ff0e55221e745d9a1bc8d7ad95342e0e6945648fad34148d3"


def test_decision_version_is_pinned_to_the_question_wording() -> None:
    payload = {
        "rowQuestions": {k: q.model_dump(mode="json") for k, q in ROW_QUESTIONS.items()},
        "correctness": CORRECTNESS_QUESTION.model_dump(mode="json"),
        "chunk": chunk_question("X").model_dump(mode="json"),
    }
    assert hashlib.sha256(canonical_json(payload)).hexdigest() == DEFINITIONS_SHA256
    assert DECISION_VERSION == "1.0.0"
    assert DECISION_IDS == {
        "with-reference": "ragbatch.rag-diagnosis.with-reference",
        "without-reference": "ragbatch.rag-diagnosis.without-reference",
    }


# -- request keys ---------------------------------------------------------------------------------


def test_request_key_is_stable() -> None:
    a = build_request(with_reference(), "jev-latest")
    b = build_request(with_reference(), "jev-latest")
    key = request_key("https://api.example/v1/systemone", a)
    assert key == request_key("https://api.example/v1/systemone", b)
    assert len(key) == 64 and int(key, 16) >= 0


def test_request_key_ignores_state_key_order_and_labels() -> None:
    request = build_request(make_row(), "m")
    reordered = JevRequest(
        model="m", state=dict(reversed(list(request.state.items()))), questions=request.questions
    )
    assert request_key("e", reordered) == request_key("e", request)
    assert request_key("e", build_request(leaky_row(), "m")) == request_key(
        "e", build_request(with_reference(), "m")
    )


@pytest.mark.parametrize(
    ("endpoint", "model", "row"),
    [
        ("https://other.example/v1/systemone", "jev-latest", {}),
        ("https://api.example/v1/systemone", "jev-1.13.0", {}),
        ("https://api.example/v1/systemone", "jev-latest", {"answer": "In 1989."}),
        ("https://api.example/v1/systemone", "jev-latest", {"question": "When?"}),
        ("https://api.example/v1/systemone", "jev-latest", {"contexts": []}),
        ("https://api.example/v1/systemone", "jev-latest", {"referenceAnswer": "1989"}),
    ],
)
def test_request_key_changes_with_endpoint_model_and_state(
    endpoint: str, model: str, row: dict[str, Any]
) -> None:
    base = request_key("https://api.example/v1/systemone", build_request(make_row(), "jev-latest"))
    assert request_key(endpoint, build_request(make_row(**row), model)) != base


def test_request_key_changes_with_the_questions() -> None:
    request = build_request(make_row(), "m")
    fewer = JevRequest(
        model="m",
        state=request.state,
        questions={k: v for k, v in request.questions.items() if k != "contradiction"},
    )
    assert request_key("e", fewer) != request_key("e", request)


# -- token estimates ------------------------------------------------------------------------------


def test_estimate_input_tokens_is_positive() -> None:
    empty = make_row(question="", answer="", contexts=[])
    assert estimate_input_tokens(build_request(empty, "m")) > 0


def test_estimate_input_tokens_grows_with_the_state() -> None:
    short = estimate_input_tokens(build_request(make_row(answer="1989."), "m"))
    long = estimate_input_tokens(build_request(make_row(answer="1989. " * 200), "m"))
    assert long > short
    more_contexts = [{"id": f"c{i}", "text": "x" * 400} for i in range(10)]
    many = estimate_input_tokens(build_request(make_row(contexts=more_contexts), "m"))
    assert many > estimate_input_tokens(build_request(make_row(), "m"))


def test_estimate_input_tokens_ignores_the_model_name() -> None:
    row = make_row()
    assert estimate_input_tokens(build_request(row, "a")) == estimate_input_tokens(
        build_request(row, "a-much-longer-model-name")
    )


# -- reading answers back -------------------------------------------------------------------------


def test_read_judgments_maps_answers_back_by_context_id() -> None:
    row = with_reference()
    answers = {
        f"{CHUNK_PREFIX}0": 0.9,
        f"{CHUNK_PREFIX}1": 0.1,
        "contextSufficiency": 0.8,
        "contextConflict": 0.05,
        "answerRelevance": 0.95,
        "groundedness": 0.85,
        "contradiction": 0.02,
        "correctness": 0.7,
    }
    j = read_judgments(row, answers)
    assert j.retrieval.chunk_relevance == {"c1": 0.9, "c2": 0.1}
    assert (j.retrieval.sufficiency, j.retrieval.conflict) == (0.8, 0.05)
    assert (j.generation.relevance, j.generation.groundedness) == (0.95, 0.85)
    assert (j.generation.contradiction, j.generation.correctness) == (0.02, 0.7)
    without = read_judgments(make_row(), {k: v for k, v in answers.items() if k != "correctness"})
    assert without.generation.correctness is None
