"""The Markdown summary: tables present, numbers rounded, absent or extra sections handled."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ConfigDict

from ragbatch.core._pricing import Cost
from ragbatch.metrics._diagnostic_matrix import diagnose_names
from ragbatch.metrics._scores import Latency
from ragbatch.report._markdown import report_markdown, table_markdown
from ragbatch.report._models import Failures, Report, RowsOmitted
from ragbatch.report._tables import (
    Table,
    extra_tables,
    is_numeric_text,
    section_title,
    slices_table,
    usd,
)
from ragbatch.run._job import run_job
from ragbatch.run._options import RunOptions

ROOT = Path(__file__).resolve().parents[2]
CLAIM_ROW = {
    "id": "x1",
    "question": "What does the plan include?",
    "contexts": [
        {"id": "p1", "text": "The plan includes 10,000 API calls per month."},
        {"id": "p2", "text": "Support is by email."},
    ],
    "answer": "The plan includes unlimited API calls. Support is by email. Great choice!",
    "claims": [
        {"id": "k1", "text": "The plan includes unlimited API calls.", "citations": ["p1"]},
        {"id": "k2", "text": "Support is by email.", "citations": ["p2"]},
        {"id": "k3", "text": "Great choice!", "citations": [], "impact": "low"},
    ],
    "expected": {
        "diagnosis": "GENERATOR_UNGROUNDED",
        "claims": {"k1": "contradicted", "k2": "supported", "k3": "not_applicable"},
    },
    "mock": {
        "retrieval": {
            "chunkRelevance": {"p1": 0.95, "p2": 0.7},
            "sufficiency": 0.9,
            "conflict": 0.05,
        },
        "generation": {"relevance": 0.95, "groundedness": 0.9, "contradiction": 0.1},
        "claims": {
            "k1": {
                "supported": 0.05,
                "contradicted": 0.9,
                "insufficient": 0.04,
                "not_applicable": 0.01,
            },
            "k2": {
                "supported": 0.95,
                "contradicted": 0.01,
                "insufficient": 0.03,
                "not_applicable": 0.01,
            },
        },
    },
    "baseline": {"diagnosis": "PASS", "confidence": 0.8},
}


class ExtendedReport(Report):
    """A report with sections this code does not know yet (they must render, not break)."""

    model_config = ConfigDict(extra="allow")


@pytest.fixture(scope="module")
def report() -> Report:
    return Report.model_validate_json((ROOT / "reports/expected-report.json").read_bytes())


@pytest.fixture(scope="module")
def markdown(report: Report) -> str:
    return report_markdown(report)


def test_headline_table_has_every_mode_rounded(report: Report, markdown: str) -> None:
    assert "| mode | accuracy | overall accuracy | macro-F1 | failures | ECE | AURC |" in markdown
    jev = report.modes.jev_only
    acc = jev.classification.accuracy
    row = next(line for line in markdown.splitlines() if line.startswith("| Jev-only |"))
    assert f"{100 * acc:.1f}% ({jev.classification.correct}/{jev.classification.successful})" in row
    assert f"| {jev.calibration.ece:.3f} |" in row
    assert f"{jev.latency.p50_ms:,.0f} ms" in row
    assert "USD 0.00199" in row  # 0.001989582, three significant digits
    for mode in ("| baseline |", "| cascade |"):
        assert any(line.startswith(mode) for line in markdown.splitlines())


def test_numbers_are_rounded_for_humans(report: Report, markdown: str) -> None:
    assert repr(report.modes.jev_only.classification.accuracy) not in markdown
    assert not re.search(r"\d\.\d{6,}", markdown)  # JSON keeps 16 digits, the summary does not


def test_cascade_routes_components_failures_limits(report: Report, markdown: str) -> None:
    cascade = report.modes.cascade
    assert f"| fallback rate | {100 * cascade.fallback_rate:.1f}% (6 rows) |" in markdown
    assert "| resolved by Jev | 87.5% |" in markdown
    assert "| auto | 42 | 87.5% |" in markdown
    assert "| retrieval | chunk relevance | 156 | 94.2% | 0.057 | 0.118 |" in markdown
    assert "| generation | correctness | 24 |" in markdown
    assert "### Failures by kind\n\nNo failed rows." in markdown
    assert "### Limits" in markdown and "not infallible judgment" in markdown
    assert "fail 0.2 / pass 0.8" in markdown


def test_text_columns_left_numbers_right(markdown: str) -> None:
    assert (
        "| stage | judgment | count | accuracy | Brier | ECE |\n|---|---|---:|---:|---:|---:|"
        in (markdown)
    )


def test_absent_sections_are_left_out(report: Report, markdown: str) -> None:
    assert report.modes.jev_only.claims is None
    assert "### Claims" not in markdown
    assert "Retrieval ranking" not in markdown and "Abstention" not in markdown


def test_missing_latency_cost_and_failures_render(report: Report) -> None:
    baseline = report.modes.baseline.model_copy(
        update={
            "latency": Latency(count=0),
            "cost": Cost(available=False, currency="USD", reason="no price for model x"),
            "failures": Failures(count=2, rate=0.04, by_kind={"timeout|5xx": 2}),
        }
    )
    modes = report.modes.model_copy(update={"baseline": baseline})
    text = report_markdown(report.model_copy(update={"modes": modes, "slices": None}))
    row = next(line for line in text.splitlines() if line.startswith("| baseline |"))
    assert "| n/a | n/a |" in row and "n/a (no price for model x)" in row
    assert "| timeout\\|5xx | 0 | 2 | 0 |" in text  # a pipe in a value cannot break the table
    assert "Slices" not in text


def test_claims_summary(tmp_path: Path) -> None:
    data = tmp_path / "claims.jsonl"
    data.write_bytes(orjson.dumps(CLAIM_ROW) + b"\n")
    config = RunOptions.of(
        quiet=True,
        dataset=data,
        out=None,
        groundedness="claims",
        pricing=ROOT / "pricing/typesafe-2026-12.json",
    )
    text = report_markdown(run_job(config).report)
    assert "### Claims\n" in text and "### Claims: F1 per class" in text
    assert "| per-claim accuracy | 100.0% | 50.0% |" in text
    assert "| contradicted | 1.000 | 0.000 | 1 |" in text
    assert "| missing citations (not judged) | 1 |" in text
    assert "no-fit rate" in text and "answer-level accuracy (1 rows)" in text


EXTRA: dict[str, Any] = {
    "retrievalRanking": {
        "rows": 10,
        "mrr": 0.81234,
        "at": {
            "10": {
                "hit": 1.0,
                "recall": 0.9,
                "precision": 0.2,
                "contextPrecision": 0.7,
                "ndcg": 0.8,
            },
            "1": {
                "hit": 0.5,
                "recall": 0.4,
                "precision": 0.5,
                "contextPrecision": 0.5,
                "ndcg": 0.5,
            },
        },
    },
    "answerChecks": {"rows": 5, "containsRows": 4, "containsPassRate": 0.75},
    "futureSection": {"score": 0.123456, "nested": {"count": 3, "list": [1, 2]}, "name": "x"},
    "textOnly": {"name": "no numbers here"},
    "modes": {"jevOnly": {"abstention": {"count": 4, "accuracy": 0.75, "brier": 0.1234}}},
}


def test_extra_sections_render_generically() -> None:
    tables = {t.title: t for t in extra_tables(EXTRA)}
    assert list(tables) == [
        "Retrieval ranking",
        "Answer checks",
        "Future section",
        "Abstention (Jev-only)",
    ]
    ranking = tables["Retrieval ranking"]
    assert [row[0] for row in ranking.rows] == ["1", "10"]  # K ascending, numerically
    assert ranking.rows[1] == ("10", "1.000", "0.900", "0.200", "0.700", "0.800")
    assert "MRR 0.812" in ranking.note
    assert ("containsPassRate", "75.0%") in tables["Answer checks"].rows
    assert tables["Future section"].rows == (("score", "0.123"), ("nested.count", "3"))
    assert ("accuracy", "75.0%") in tables["Abstention (Jev-only)"].rows


def test_extra_sections_through_the_report(report: Report) -> None:
    data = report.model_dump(mode="json", by_alias=True) | {
        "retrievalRanking": EXTRA["retrievalRanking"]
    }
    text = report_markdown(ExtendedReport.model_validate(data))
    assert "### Retrieval ranking" in text and "| K | Hit@K | Recall@K |" in text


def test_slices_flagged_only() -> None:
    dump = {
        "slices": {
            "rule": "flag rule",
            "slices": [
                {"dimension": "topic", "value": "a", "rows": 6, "metrics": {"accuracy": 0.5},
                 "deltas": {"accuracy": -0.27}, "flag": True, "reason": "accuracy 0.500 vs 0.770"},
                {"dimension": "topic", "value": "b", "rows": 9, "metrics": {"accuracy": 0.9},
                 "deltas": {"accuracy": 0.13}, "flag": False},
            ],
        }
    }  # fmt: skip
    flagged = slices_table(dump, flagged_only=True)
    assert flagged is not None and len(flagged.rows) == 1
    assert flagged.headers == (
        "dimension", "value", "rows", "flag", "reason", "accuracy", "Δ accuracy",
    )  # fmt: skip
    assert flagged.rows == (("topic", "a", "6", "⚑", "accuracy 0.500 vs 0.770", "0.500", "-0.270"),)
    assert flagged.note == "2 slices, 1 flagged. flag rule"
    every = slices_table(dump)
    assert every is not None and len(every.rows) == 2
    assert slices_table({}) is None and slices_table({"slices": "odd"}) is None


def test_table_without_rows_shows_only_its_note() -> None:
    text = table_markdown(Table("Empty", ("a", "b"), (), "Nothing here."))
    assert text == "### Empty\n\nNothing here.\n"


@pytest.mark.parametrize(
    ("amount", "expected"),
    [(0.001989582, "USD 0.00199"), (6.44e-05, "USD 0.0000644"), (0.0, "USD 0.00"),
     (12.3456, "USD 12.35"), (None, "n/a")],
)  # fmt: skip
def test_usd(amount: float | None, expected: str) -> None:
    assert usd(amount) == expected


@given(st.floats(min_value=1e-12, max_value=1e12, allow_nan=False, allow_infinity=False))
def test_usd_never_scientific(amount: float) -> None:
    text = usd(amount)
    assert "e" not in text.removeprefix("USD") and text.startswith("USD ")


def test_is_numeric_text() -> None:
    assert all(map(is_numeric_text, ["77.1%", "0.096", "USD 0.002", "-0.2", "n/a", "1,534 in"]))
    assert not any(map(is_numeric_text, ["retrieval", "PASS", "auto"]))


@pytest.fixture(scope="module")
def golden_markdown() -> str:
    config = RunOptions.of(
        quiet=True,
        dataset=ROOT / "datasets/golden-fixture.jsonl",
        out=None,
        pricing=ROOT / "pricing/typesafe-2026-12.json",
        slice_by=("docType",),
    )
    return report_markdown(run_job(config).report)


def test_diagnostic_matrix_follows_the_headline(golden_markdown: str) -> None:
    headings = [line for line in golden_markdown.splitlines() if line.startswith("### ")]
    assert headings[:3] == [
        "### Headline",
        "### Where to look first (diagnostic matrix)",
        "### Cascade",
    ]
    assert (
        "| layer | metric | value | limit | finding | root cause | look first |\n"
        "|---|---|---:|---|---|---|---|\n"
        "| generation | falseAnswerRate | 0.308 | max 0.050 | High False Answer Rate | The system "
        "answers when it should abstain: abstention instructions weak, or the model answers "
        "from plausible but insufficient context | Counterfactual eval (remove the answer "
        "document, verify refusal); abstention instructions in the prompt |\n\n"
        "Trace back from each weak metric to the pipeline layer that owns it and fix the "
        "upstream layer first: retrieval before generation.\n"
    ) in golden_markdown


def test_diagnostic_matrix_lists_retrieval_first(report: Report) -> None:
    findings = diagnose_names(["faithfulness"]) + diagnose_names(["recall@10", "precision@5"])
    assert [f.layer for f in findings] == ["generation", "retrieval", "retrieval"]
    text = report_markdown(report.model_copy(update={"diagnostics": findings}))
    section = text.split("### Where to look first (diagnostic matrix)")[1].split("### ")[0]
    rows = [line for line in section.splitlines() if line.startswith(("| retrieval", "| gener"))]
    assert [row.split(" | ")[1] for row in rows] == ["recall@10", "precision@5", "faithfulness"]
    assert rows[0].startswith("| retrieval | recall@10 | n/a | — | Low Recall@K | Bad chunking")
    empty = report_markdown(report.model_copy(update={"diagnostics": []}))
    assert (
        "### Where to look first (diagnostic matrix)\n\nNo metric is past its diagnostic limit."
        in empty
    )
    assert "Where to look first" not in report_markdown(report)  # no golden set, no matrix


def test_section_titles_are_words(golden_markdown: str, report: Report) -> None:
    headings = [line for line in golden_markdown.splitlines() if line.startswith("### ")]
    assert "### Chunk agreement with the golden documents" in headings
    assert "### Golden set health" in headings
    assert not [h for h in headings if re.search(r"[a-z][A-Z]", h)]  # no camelCase key
    assert "| K | chunks | agreement |\n|---:|---:|---:|\n| 1 | 51 | 92.2% |" in golden_markdown
    assert "| happy | 38 | 59.4% | 60.0% |" in golden_markdown
    omitted = report.model_copy(
        update={"rows": [], "rows_omitted": RowsOmitted(rows=48, limit=10, reason="r")}
    )
    text = report_markdown(omitted)
    assert "### Rows left out of the report\n" in text and "### rowsOmitted" not in text
    assert section_title("someNewSection") == "Some new section"
