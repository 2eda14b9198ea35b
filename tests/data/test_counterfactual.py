"""Counterfactual rows: answer documents removed, abstention expected, linked to the source row."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ragbatch.core._schema import Context, Row
from ragbatch.data._counterfactual import (
    CounterfactualStats,
    counterfactual_row,
    counterfactual_rows,
    is_answer_context,
    skip_reason,
    write_counterfactuals,
)
from ragbatch.metrics._ranking import rank_golden


def make_row(row_id: str = "r1", **fields: Any) -> Row:
    """A labelled row: c1 and c2 come from the answer document, c3 from another one."""
    data: dict[str, Any] = {
        "id": row_id,
        "question": "How do I reset the X200?",
        "contexts": [
            {"id": "c1", "text": "Hold Reset for 10 s.", "source": "x200.pdf#page=7"},
            {"id": "c2", "text": "The light blinks amber.", "source": "x200.pdf#page=7"},
            {"id": "c3", "text": "The X300 has no reset button.", "source": "x300.pdf"},
        ],
        "answer": "Hold the Reset button for 10 seconds.",
        "referenceAnswer": "Hold Reset for 10 seconds.",
        "expected": {
            "diagnosis": "PASS",
            "retrieval": {"chunkRelevance": {"c1": True, "c2": True, "c3": False}},
        },
        "mock": {
            "retrieval": {"chunkRelevance": {"c1": 0.9, "c2": 0.7, "c3": 0.1}, "sufficiency": 0.9},
            "generation": {"groundedness": 0.95},
        },
        "baseline": {"diagnosis": "PASS", "confidence": 0.8},
        "claims": [
            {"id": "k1", "text": "Hold the Reset button for 10 seconds", "citations": ["c1", "c3"]}
        ],
        "metadata": {"topic": "devices"},
        "golden": {
            "expectedDocuments": ["x200.pdf#page=7"],
            "relevance": {"x200.pdf#page=7": 3},
            "category": "happy",
            "expectedAbstention": False,
        },
        "traceId": "t-1",
    }
    data.update(fields)
    return Row.model_validate(data)


def test_variant_removes_answer_contexts_by_source_and_links_back() -> None:
    row = make_row()
    cf = counterfactual_row(row)
    assert cf is not None
    assert cf.id == "r1#cf"
    assert [c.id for c in cf.contexts] == ["c3"]
    assert cf.question == row.question
    assert cf.answer == row.answer  # kept, but flagged for regeneration
    assert cf.metadata == {"topic": "devices", "counterfactual": True, "needsNewAnswer": True}
    assert cf.golden is not None and row.golden is not None
    assert cf.golden.expected_abstention is True
    assert cf.golden.counterfactual_of == "r1"
    assert cf.golden.category == "unanswerable"
    assert cf.golden.expected_documents == row.golden.expected_documents
    assert cf.golden.relevance == row.golden.relevance
    assert cf.reference_answer == row.reference_answer
    assert cf.trace_id == "t-1"
    assert row.metadata == {"topic": "devices"}  # the source row is untouched


def test_labels_become_retrieval_insufficient_and_old_judgments_are_dropped() -> None:
    cf = counterfactual_row(make_row())
    assert cf is not None and cf.expected is not None
    assert cf.expected.diagnosis == "RETRIEVAL_INSUFFICIENT"
    assert cf.expected.retrieval is None and cf.expected.generation is None
    assert cf.mock is None and cf.baseline is None and cf.claims is None


def test_row_without_labels_stays_without() -> None:
    cf = counterfactual_row(make_row(expected=None))
    assert cf is not None
    assert cf.expected is None


def test_keep_mock_keeps_judgments_restricted_to_remaining_contexts() -> None:
    cf = counterfactual_row(make_row(), keep_mock=True)
    assert cf is not None and cf.mock is not None and cf.claims is not None
    assert cf.mock.retrieval.chunk_relevance == {"c3": 0.1}
    assert cf.mock.retrieval.sufficiency == 0.9
    assert cf.baseline is not None and cf.baseline.diagnosis == "PASS"
    assert cf.claims[0].citations == ["c3"]
    assert cf.expected is not None and cf.expected.diagnosis == "RETRIEVAL_INSUFFICIENT"


def test_match_by_context_id_when_there_is_no_source() -> None:
    row = make_row(
        contexts=[{"id": "doc-a", "text": "a"}, {"id": "doc-b", "text": "b"}],
        expected=None,
        mock=None,
        claims=None,
        golden={"expectedDocuments": ["doc-a"]},
    )
    cf = counterfactual_row(row)
    assert cf is not None
    assert [c.id for c in cf.contexts] == ["doc-b"]


def test_context_id_matches_even_when_it_has_a_source() -> None:
    context = Context(id="c1", text="t", source="other.pdf")
    assert is_answer_context(context, ["c1"])
    assert is_answer_context(context, ["other.pdf"])
    assert not is_answer_context(context, ["c2", "x.pdf"])


def test_ranking_shows_the_expected_documents_missing() -> None:
    row = make_row()
    cf = counterfactual_row(row)
    assert cf is not None
    before = rank_golden(row.contexts, row.golden, ks=(10,))
    after = rank_golden(cf.contexts, cf.golden, ks=(10,))
    assert before is not None and after is not None
    assert before.at["10"].recall == 1.0
    assert after.at["10"].recall == 0.0
    assert after.relevant == 1


@pytest.mark.parametrize(
    ("golden", "reason"),
    [
        (None, "no_expected"),
        ({"category": "edge"}, "no_expected"),
        ({"expectedDocuments": []}, "no_expected"),
        ({"expectedDocuments": ["elsewhere.pdf"]}, "no_match"),
        ({"expectedDocuments": ["x300.pdf"]}, None),
    ],
)
def test_skip_reasons(golden: dict[str, Any] | None, reason: str | None) -> None:
    row = make_row(golden=golden)
    assert skip_reason(row) == reason
    assert (counterfactual_row(row) is None) == (reason is not None)


def test_removing_every_context_leaves_an_empty_list() -> None:
    row = make_row(golden={"expectedDocuments": ["x200.pdf#page=7", "x300.pdf"]})
    cf = counterfactual_row(row)
    assert cf is not None
    assert cf.contexts == []


def test_rows_are_yielded_in_input_order_skipping_the_rest() -> None:
    rows = [
        make_row("a"),
        make_row("b", golden=None),
        make_row("c", golden={"expectedDocuments": ["nowhere"]}),
        make_row("d", golden={"expectedDocuments": ["x300.pdf"]}),
    ]
    assert [cf.id for cf in counterfactual_rows(rows)] == ["a#cf", "d#cf"]


def test_write_counterfactuals_round_trips_and_counts(tmp_path: Path) -> None:
    rows = [
        make_row("a"),
        make_row("b", golden=None),
        make_row("c", golden={"expectedDocuments": ["nowhere"]}),
        make_row("d", golden={"expectedDocuments": ["x300.pdf"]}, metadata=None),
        make_row("e", golden={"expectedDocuments": []}),
    ]
    out = tmp_path / "cf.jsonl"
    stats = write_counterfactuals(iter(rows), out)
    assert stats == CounterfactualStats(
        rows_in=5, written=2, skipped_no_expected=2, skipped_no_match=1
    )
    assert stats.model_dump(by_alias=True) == {
        "rowsIn": 5,
        "written": 2,
        "skippedNoExpected": 2,
        "skippedNoMatch": 1,
    }
    text = out.read_text(encoding="utf-8")
    assert text.endswith("\n")
    lines = text.splitlines()
    loaded = [Row.model_validate_json(line) for line in lines]
    assert loaded == list(counterfactual_rows(rows))
    assert '"counterfactualOf":"a"' in lines[0]
    assert '"expectedAbstention":true' in lines[0]
    assert "null" not in text  # exclude_none
    assert loaded[1].metadata == {"counterfactual": True, "needsNewAnswer": True}


def test_write_with_nothing_to_write_leaves_an_empty_file(tmp_path: Path) -> None:
    out = tmp_path / "cf.jsonl"
    stats = write_counterfactuals([make_row(golden=None)], out)
    assert (stats.rows_in, stats.written, stats.skipped_no_expected) == (1, 0, 1)
    assert out.read_text(encoding="utf-8") == ""
