"""The HTML report: structure (html.parser), self-containment, claim highlights, escaping and
the missing extra (the headless Chromium smoke tests: test_html_browser.py)."""

from __future__ import annotations

import ast
import html
import re
import sys
from collections import Counter
from pathlib import Path

import matplotlib
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from matplotlib.text import Text

import ragbatch.report
from ragbatch.core._errors import ConfigError
from ragbatch.core._policy import Guarantee
from ragbatch.data._jsonl import JsonlReader
from ragbatch.report import _charts as charts
from ragbatch.report._html import ROW_CAP, answer_segments, report_html
from ragbatch.report._models import ClaimOut, Report
from ragbatch.run._job import run_job
from ragbatch.run._options import RunOptions
from tests.report.html_page import CHART_IDS, ROOT, Page, dataset_texts, overlapping

GOOD = {"supported": 0.95, "contradicted": 0.01, "insufficient": 0.03, "not_applicable": 0.01}
MOCK = {
    "retrieval": {"chunkRelevance": {"p1": 0.95, "p2": 0.9}, "sufficiency": 0.9, "conflict": 0.05},
    "generation": {"relevance": 0.95, "groundedness": 0.9, "contradiction": 0.05},
}
CLAIM_ROWS = [
    {
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
        "expected": {"diagnosis": "GENERATOR_UNGROUNDED"},
        "mock": MOCK
        | {"claims": {"k1": GOOD | {"supported": 0.05, "contradicted": 0.9}, "k2": GOOD}},
        "baseline": {"diagnosis": "PASS", "confidence": 0.8},
    },
    {
        "id": "x2 <i>",
        "question": "How much & how fast?",
        "contexts": [
            {"id": "p1", "text": "Prices vary."},
            {"id": "p2", "text": "Refunds take 30 days."},
        ],
        "answer": "Prices start at <b>$5</b> & rise. Refunds take 30 days.",
        "claims": [
            {"id": "k1", "text": "Prices start at <b>$5</b> & rise.", "citations": ["p1"]},
            {"id": "k2", "text": "Refunds take 30 days.", "citations": ["p2"]},
        ],
        "expected": {"diagnosis": "GENERATOR_UNGROUNDED"},
        "mock": MOCK
        | {"claims": {"k1": GOOD | {"supported": 0.05, "insufficient": 0.9}, "k2": GOOD}},
        "baseline": {"diagnosis": "PASS", "confidence": 0.8},
    },
]


@pytest.fixture(scope="module")
def claims_data(tmp_path_factory: pytest.TempPathFactory) -> tuple[Report, dict[str, str]]:
    data = tmp_path_factory.mktemp("claims") / "claims.jsonl"
    data.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in CLAIM_ROWS))
    pricing = ROOT / "pricing/typesafe-2026-12.json"
    report = run_job(
        RunOptions.of(quiet=True, dataset=data, out=None, groundedness="claims", pricing=pricing)
    ).report
    return report, {row.id: row.answer for row in JsonlReader(data)}


def section(page: str, section_id: str) -> str:
    start = page.index(f'<section id="{section_id}">')
    return page[start : page.index("</section>", start)]


def test_diagnostic_matrix_section_right_after_the_headline(golden_page: str) -> None:
    ids = [i for i in Page(golden_page).ids if i in {"headline", "look-first", "reliability"}]
    assert ids == ["headline", "look-first", "reliability"]
    block = section(golden_page, "look-first")
    assert "<h2>Where to look first (diagnostic matrix)</h2>" in block
    assert "<th>root cause</th>" in block.replace(' class="text"', "")
    assert ">High False Answer Rate</td>" in block and ">max 0.050</td>" in block
    assert '<a href="#look-first">' in golden_page


def test_section_titles_are_words_in_the_page(golden_page: str, page_html: str) -> None:
    details = section(golden_page, "details")
    titles = re.findall(r"<h3>(.*?)</h3>", details)
    assert "Chunk agreement with the golden documents" in titles
    assert "Golden set health" in titles
    assert not [t for t in titles if re.search(r"[a-z][A-Z]", t)]
    assert 'id="look-first"' not in page_html  # no golden set: no diagnostic matrix


def test_rows_table_has_a_question_column(page_html: str) -> None:
    block = section(page_html, "row-results")
    assert (
        "<thead><tr><th>id</th><th>question</th><th>diagnosis</th><th>route</th><th>expected</th>"
        "<th>confidence</th><th>answer</th></tr></thead>"
    ) in block
    first = next(iter(JsonlReader(ROOT / "datasets/rag-fixture.jsonl")))
    assert f'<td class="question">{html.escape(first.question, quote=False)}</td>' in block
    assert '<td class="question">—</td>' in section(report_html_of_claims(), "row-results")


def report_html_of_claims() -> str:
    """A page without questions passed: the column shows a dash."""
    report = Report.model_validate_json((ROOT / "reports/expected-report.json").read_bytes())
    return report_html(report)


def test_red_diagnoses_have_a_legend(report: Report, page_html: str) -> None:
    legend = (
        '<span class="legend note" id="mismatch-legend"><span class="mismatch-key">red '
        "diagnosis</span> = differs from the expected (labelled) diagnosis</span>"
    )
    assert legend in page_html and 'class="mismatch"' in page_html
    unlabelled = report.model_copy(
        update={"rows": [r.model_copy(update={"expected": None}) for r in report.rows]}
    )
    assert "mismatch-legend" not in report_html(unlabelled)


def test_slices_table_puts_flag_and_reason_first(golden_page: str) -> None:
    block = section(golden_page, "slices")
    heads = re.findall(r"<th(?: [^>]*)?>(.*?)</th>", block)
    assert heads[:5] == ["dimension", "value", "rows", "flag", "reason"]
    assert heads[5] == "accuracy" and "Δ accuracy" in heads


@pytest.mark.parametrize("rows_out", [False, True])
def test_omitted_rows_say_where_the_rows_are(tmp_path: Path, rows_out: bool) -> None:
    config = RunOptions.of(
        quiet=True,
        dataset=ROOT / "datasets/rag-fixture.jsonl",
        out=None,
        pricing=ROOT / "pricing/typesafe-2026-12.json",
        max_report_rows=10,
        rows_out=tmp_path / "rows.jsonl" if rows_out else None,
    )
    report = run_job(config).report
    assert report.rows == [] and report.rows_omitted is not None
    reason = report.rows_omitted.reason
    block = section(report_html(report), "row-results")
    head = (
        "No rows shown: the run had 48 rows, more than --max-report-rows 10, so the report keeps "
        "aggregates only."
    )
    if rows_out:
        assert reason == "more rows than --max-report-rows: per-row results are in --rows-out"
        assert f"{head} The per-row results are in the --rows-out file of the run (JSONL)." in block
    else:
        assert reason == (
            "more rows than --max-report-rows and no --rows-out: per-row results were not kept; "
            "rerun with --rows-out PATH (cached rows are free) to keep them"
        )
        assert (
            f"{head} No --rows-out was given, so they were not kept: rerun with --rows-out PATH "
            "(cached rows are free) or a larger --max-report-rows to see them."
        ) in block
    assert "rows-shown" not in block and "Answer texts are not in the report" not in block


def label_boxes(report: Report) -> list[tuple[float, ...]]:
    with matplotlib.rc_context(charts.RC):
        fig, labels = charts.sweep_figure(report)
        fig.draw_without_rendering()
        return [tuple(Text.get_window_extent(label).extents) for label in labels]


def test_sweep_labels_do_not_overlap(report: Report) -> None:
    assert report.tradeoff is not None
    close = [p.jev_only.coverage for p in report.tradeoff.points][2:]
    assert max(close) - min(close) < 0.05  # 0.2/0.8, 0.3/0.7, 0.4/0.6: nearly one spot
    assert overlapping(label_boxes(report)) == []
    # a denser sweep: seven points within two coverage points of each other
    base = report.tradeoff.points[2]
    dense = [
        base.model_copy(update={"fail_threshold": 0.2 + i / 100, "pass_threshold": 0.8 - i / 100,
                                "policy": "sweep",
                                "jev_only": base.jev_only.model_copy(
                                    update={"coverage": base.jev_only.coverage + i / 300})})
        for i in range(7)
    ]  # fmt: skip
    crowded = report.model_copy(
        update={"tradeoff": report.tradeoff.model_copy(update={"points": dense})}
    )
    assert overlapping(label_boxes(crowded)) == []


def test_structure(report: Report, page_html: str) -> None:
    page = Page(page_html)
    assert page_html.startswith("<!DOCTYPE html>")
    for required in (*CHART_IDS, "confusion", "rows"):
        assert required in page.ids
    assert set(CHART_IDS) <= page.svg_in  # each chart's <svg> sits inside its id
    duplicates = [i for i, n in Counter(page.ids).items() if n > 1]
    assert duplicates == []
    assert len(page.rows) == len(report.rows) == 48
    assert page.tags["script"] == 1 and "<script src" not in page_html


def test_self_contained(page_html: str) -> None:
    page = Page(page_html)
    remote = [u for u in page.urls if u.startswith(("http://", "https://", "//"))]
    assert remote == []
    assert page.tags["link"] == 0 and page.tags["img"] == 0 and page.tags["iframe"] == 0
    assert "@import" not in page_html and "url(http" not in page_html


def test_confusion_matrix_cells(report: Report, page_html: str) -> None:
    confusion = report.modes.jev_only.classification.confusion
    block = page_html[page_html.index('id="confusion"') : page_html.index('id="details"')]
    for label in confusion.labels:
        assert f"<th>{label}</th>" in block
    assert block.count('class="s10 diag"') == 1  # the largest cell, on the diagonal (PASS, 8)


def test_deterministic(report: Report, page_html: str) -> None:
    assert report_html(report, *dataset_texts(ROOT / "datasets/rag-fixture.jsonl")) == page_html


def test_claim_spans_are_highlighted_and_escaped(
    claims_data: tuple[Report, dict[str, str]],
) -> None:
    report, answers = claims_data
    text = report_html(report, answers)
    marks = Page(text).marks
    assert [m["class"] for m in marks] == ["contradicted", "missing-citation", "insufficient"]
    assert marks[0]["text"] == "The plan includes unlimited API calls."
    assert marks[0]["title"] == "k1: contradicted (confidence 0.90)"
    assert marks[1]["text"] == "Great choice!"
    assert marks[2]["text"] == "Prices start at <b>$5</b> & rise."  # text, once unescaped
    assert "Prices start at &lt;b&gt;$5&lt;/b&gt; &amp; rise." in text  # never markup
    assert "<b>$5" not in text and "x2 &lt;i&gt;" in text
    assert "Support is by email.</mark>" not in text  # supported claims stay plain


def test_claims_without_answer_texts(claims_data: tuple[Report, dict[str, str]]) -> None:
    text = report_html(claims_data[0])
    assert "Answer texts are not in the report" in text
    assert [m["text"] for m in Page(text).marks] == ["k1", "k3", "k1"]  # listed by claim id


def test_row_cap(report: Report) -> None:
    many = report.model_copy(update={"rows": report.rows * (ROW_CAP // len(report.rows) + 1)})
    text = report_html(many)
    assert len(Page(text).rows) == ROW_CAP
    assert f"Showing the first {ROW_CAP} of {len(many.rows)} rows" in text


def test_missing_extra_is_a_config_error(report: Report, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "jinja2", None)
    with pytest.raises(ConfigError, match=r"pip install 'ragbatch\[html\]'"):
        report_html(report)
    monkeypatch.delitem(sys.modules, "jinja2")
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.delitem(sys.modules, "ragbatch.report._charts", raising=False)
    monkeypatch.delattr(ragbatch.report, "_charts", raising=False)
    with pytest.raises(ConfigError, match="'html' extra"):
        report_html(report)


@pytest.mark.parametrize("module", ["html", "markdown", "tables"])
def test_base_install_imports_no_extra(module: str) -> None:
    tree = ast.parse((ROOT / "ragbatch" / "report" / f"_{module}.py").read_text(encoding="utf-8"))
    top = [n for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)]
    names = {a.name for n in top if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module or "" for n in top if isinstance(n, ast.ImportFrom)}
    assert not {name.split(".")[0] for name in names} & {"jinja2", "matplotlib", "markupsafe"}
    assert "ragbatch.report._charts" not in names


def _claim(start: int, end: int, verdict: str) -> ClaimOut:
    return ClaimOut(
        id="k", start=start, end=end, citations=[], impact="normal", evidence=[],
        verdict=verdict, confidence=0.9, uncertain=False, veto=False,
    )  # fmt: skip


@given(
    st.text(max_size=40),
    st.lists(
        st.tuples(
            st.integers(-5, 50),
            st.integers(-5, 50),
            st.sampled_from(["contradicted", "insufficient", "missing-citation", "supported"]),
        ),
        max_size=6,
    ),
)
def test_segments_give_back_the_answer(answer: str, spans: list[tuple[int, int, str]]) -> None:
    segments = answer_segments(answer, [_claim(*span) for span in spans])
    assert "".join(s.text for s in segments) == answer
    assert all(s.text for s in segments)
    assert all(s.verdict != "supported" for s in segments)


def test_guarded_run_shows_both_routings_and_the_guarantee(tmp_path: Path) -> None:
    pricing = ROOT / "pricing/typesafe-2026-12.json"
    guarded = run_job(
        RunOptions.of(
            quiet=True,
            dataset=ROOT / "datasets/rag-fixture.jsonl",
            out=None,
            pricing=pricing,
            routing="guarded",
        )
    ).report
    page = Page(report_html(guarded))
    assert "chart-routing-curves" in page.svg_in
    assert "guarantee" not in page.ids  # no calibrated policy: nothing is guaranteed
    g = Guarantee(
        target_risk=0.05, confidence=0.95, method="fixed-sequence", routing="guarded",
        certified_on=100, auto_rows=40, errors=0, estimated_coverage=0.4,
        coverage_lower_bound=0.32, estimated_risk=0.0, candidates_tested=3, per_diagnosis=[],
        assumption="rows the policy judges are i.i.d. draws",
    )  # fmt: skip
    promised = guarded.model_copy(
        update={"policy": guarded.policy.model_copy(update={"guarantee": g})}
    )
    page_html = report_html(promised)
    assert "guarantee" in Page(page_html).ids
    assert "At ≤ 5% risk (95% confidence) Jev decides" in page_html
