"""The judge audit in every view: summary line, Markdown table with bars, HTML section."""

from __future__ import annotations

import re

import pytest

from ragbatch.report import audit_warning, summary_text
from ragbatch.report._audit_view import audit_line, audit_table, bar_scale, text_bar
from ragbatch.report._html import report_html
from ragbatch.report._markdown import report_markdown
from ragbatch.report._models import Report
from tests.report.audit_section import audit, audit_json, entry
from tests.report.html_page import ROOT


@pytest.fixture(scope="module")
def plain() -> Report:
    return Report.model_validate_json((ROOT / "reports/expected-report.json").read_bytes())


@pytest.fixture(scope="module")
def audited(plain: Report) -> Report:
    return plain.model_copy(update={"judge_audit": audit()})


def test_a_report_without_the_section_shows_none_of_it(plain: Report) -> None:
    assert plain.judge_audit is None
    assert "judge audit" not in summary_text(plain)
    assert "Judge audit" not in report_markdown(plain)
    assert 'id="judge-audit"' not in report_html(plain)


def test_the_summary_line_names_the_flagged_entries(audited: Report) -> None:
    line = [x for x in summary_text(audited).splitlines() if "judge audit" in x]
    assert line == [
        "  judge audit (200 rows probed, 3 checks): 2 FLAGGED over the maximum flip rate 5.0%: "
        "order/chunkRelevance 12.0% (8.0% to 17.0%), length/groundedness 9.0% (6.0% to 13.0%)"
    ]


def test_the_summary_line_without_flags_gives_the_highest_flip_rate() -> None:
    quiet = audit().model_copy(
        update={"probes": [entry("repeat", "groundedness", (0.02, 0.01, 0.05), False)]}
    )
    assert audit_line(quiet) == (
        "  judge audit (200 rows probed, 1 checks): none flagged, highest flip rate "
        "repeat/groundedness 2.0%"
    )


def test_markdown_has_one_row_per_entry_flagged_ones_marked(audited: Report) -> None:
    text = report_markdown(audited)
    assert text.count("### Judge audit") == 1  # its own table, not also the generic one
    section = text.split("### Judge audit", 1)[1].split("### Limits", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and "---" not in line]
    assert len(rows) == 1 + 3  # headers and the entries
    assert rows[1].startswith("| order | chunkRelevance | 200 | 12.0% | 8.0% to 17.0% | +0.040 |")
    assert "FLAGGED" in rows[1] and "FLAGGED" in rows[2] and "FLAGGED" not in rows[3]
    assert "200 of 4000 rows probed" in section


@pytest.mark.parametrize(
    ("flips", "bar"),
    [
        # scale 0 to 20 %: one cell a percent; the limit (5 %) in cell 5
        ((0.12, 0.08, 0.17), "`·····|··├───●────┤···`"),
        ((0.0, 0.0, 0.04), "`●───┤|···············`"),
        ((0.02, 0.01, 0.2), "`·├●─────────────────┤`"),  # the interval hides the limit
    ],
)
def test_text_bar_draws_the_interval_the_rate_and_the_limit(
    flips: tuple[float, float, float], bar: str
) -> None:
    e = entry("order", "chunkRelevance", flips, False)
    assert text_bar(e, 0.2, 0.05) == bar


def test_the_bars_scale_reaches_the_highest_interval() -> None:
    wide = audit().model_copy(update={"probes": [entry("order", "x", (0.3, 0.2, 0.45), True)]})
    assert bar_scale(audit()) == 0.2 and bar_scale(wide) == 0.45
    table = audit_table(wide)
    assert table is not None and table.headers[-1] == "flip rate, 0 to 45.0%"


def test_html_section_has_an_svg_bar_per_entry_and_marks_flags(audited: Report) -> None:
    page = report_html(audited)
    assert '<a href="#judge-audit">Judge audit</a>' in page
    section = page.split('<section id="judge-audit">', 1)[1].split("</section>", 1)[0]
    assert section.count("<svg") == 3
    assert len(re.findall(r'<tr class="flagged">', section)) == 2
    assert 'aria-label="order chunkRelevance: flip rate 12.0% (8.0% to 17.0%) flagged"' in section
    assert "<strong>FLAGGED</strong>" in section


def test_the_warning_names_flagged_judgments_that_are_relied_on() -> None:
    section = audit_json()
    warning = audit_warning(section, ["groundedness", "answerRelevance"], "the calibrated policy")
    assert warning is not None
    assert warning.startswith(
        "the judge audit flagged groundedness (length): the calibrated policy relies on it"
    )
    both = audit_warning(section, ["chunkRelevance", "groundedness"], "infer")
    assert both is not None and "chunkRelevance (order), groundedness (length)" in both
    assert audit_warning(section, ["contradiction"], "x") is None
    assert audit_warning(None, ["groundedness"], "x") is None
