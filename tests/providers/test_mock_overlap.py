"""The mock provider answers a row without a ``mock`` block by word overlap, under its own model
name; a row whose block lacks an answer still fails as ``mock-missing-answer``."""

from __future__ import annotations

import anyio
import pytest

from ragbatch.core import Call, ProviderError, Reply, Row, build_request
from ragbatch.providers import MOCK_MODEL, OVERLAP_MODEL, MockProvider

ROW = {
    "id": "r1",
    "question": "alpha beta",
    "contexts": [{"id": "c1", "text": "alpha beta gamma"}, {"id": "c2", "text": "alpha delta"}],
    "answer": "alpha gamma zeta",
    "referenceAnswer": "zeta",
}
GENERATION = {"relevance": 0.9, "groundedness": 0.9, "contradiction": 0.1, "correctness": 0.9}
MOCK = {
    "retrieval": {"chunkRelevance": {"c1": 0.9, "c2": 0.1}, "sufficiency": 0.9, "conflict": 0.1},
    "generation": GENERATION,
}


def fetch(row: Row) -> Reply:
    call = Call(request=build_request(row, MOCK_MODEL), row=row)
    return anyio.run(MockProvider().fetch_answers, call)


def test_a_row_without_a_mock_block_is_answered_by_word_overlap() -> None:
    reply = fetch(Row.model_validate(ROW))
    assert reply.model == OVERLAP_MODEL
    answers = {qid: answer.model_dump()["noul"] for qid, answer in reply.answers.items()}
    assert answers == {
        "chunkRelevance:0": 1.0,  # both question words
        "chunkRelevance:1": 0.5,  # one of two
        "contextSufficiency": 1.0,  # the best context's
        "contextConflict": 0.0,
        "answerRelevance": 0.5,  # alpha, not beta
        "groundedness": 0.667,  # alpha and gamma of alpha, gamma, zeta
        "contradiction": 0.0,
        "correctness": 1.0,  # zeta
    }
    assert fetch(Row.model_validate(ROW)) == reply  # the same row, the same answers


def test_a_row_with_a_mock_block_keeps_its_answers_and_a_gap_still_fails() -> None:
    reply = fetch(Row.model_validate({**ROW, "mock": MOCK}))
    assert reply.model == MOCK_MODEL
    assert reply.answers["chunkRelevance:1"].model_dump()["noul"] == 0.1
    gap = {**MOCK, "generation": {k: v for k, v in GENERATION.items() if k != "relevance"}}
    with pytest.raises(ProviderError, match="has no answer for question 'answerRelevance'") as e:
        fetch(Row.model_validate({**ROW, "mock": gap}))
    assert e.value.kind == "mock-missing-answer"
