"""The Markdown view and the terminal summary say where traces fail (docs/semantics.md §8a):
by the first failing step's kind and diagnosis, by hop position and by turn, wasted hops and
the first failing step against its labels; a run of rows alone shows none of it."""

from __future__ import annotations

from pathlib import Path

from ragbatch.report._markdown import report_markdown
from ragbatch.report._models import Report
from ragbatch.report._text import summary_text
from ragbatch.report._trace_tables import ordinal, plural, trace_tables

ROOT = Path(__file__).resolve().parents[2]
TITLES = [
    "Where traces fail: first failing step",
    "Where traces fail: by hop position",
    "Where traces fail: by turn",
    "Trace steps against their labels",
    "Trace step judgments against their labels",
]


def golden(name: str) -> Report:
    return Report.model_validate_json((ROOT / "reports" / name).read_bytes())


def test_ordinals_and_plurals() -> None:
    assert [ordinal(n) for n in (1, 2, 3, 4, 11, 12, 13, 21, 22, 101, 111)] == [
        "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "101st", "111th"]  # fmt: skip
    assert (plural(1, "trace"), plural(0, "trace"), plural(2, "wasted hop")) == (
        "1 trace", "0 traces", "2 wasted hops")  # fmt: skip


def test_the_markdown_says_where_traces_fail() -> None:
    report = golden("expected-report-traces.json")
    t = report.traces
    assert t is not None
    text = report_markdown(report)
    # after the failed rows, in this order, and nowhere a generic dump of the section
    positions = [text.index(f"### {title}\n") for title in TITLES]
    assert positions == sorted(positions) and text.index("### Failures by kind") < positions[0]
    assert "### Traces\n" not in text
    f = t.first_failing_step
    retrieval = f.by_kind["retrieval"]
    diagnoses = ", ".join(f"{d} {n}" for d, n in retrieval.by_diagnosis.items())
    share = f"{100 * retrieval.traces / f.traces:.1f}%"
    assert f"| hop (retrieval) | {retrieval.traces} ({share}) | {diagnoses} |" in text
    for h in t.by_hop_position:
        cells = [ordinal(h.hop + 1) + " hop", h.judged, h.failed]
        assert "| " + " | ".join(map(str, cells)) + " | " in text
    for u in t.by_turn:
        assert (
            f"| {ordinal(u.turn + 1)} turn | {u.traces} | {u.retrieval.failed}/{u.retrieval.judged} |"
            in text
        )
    a = t.first_failing_step_accuracy
    assert a is not None
    assert f"First failing step as labelled: {a.correct}/{a.judged} judged traces" in text
    w = t.wasted_hops
    assert f"Wasted hops: {w.wasted} of {w.hops} judged hops" in text


def test_the_summary_has_one_line_about_traces() -> None:
    report = golden("expected-report-traces.json")
    t = report.traces
    assert t is not None and t.first_failing_step_accuracy is not None
    lines = [line for line in summary_text(report).splitlines() if line.startswith("  traces: ")]
    assert len(lines) == 1
    a = t.first_failing_step_accuracy
    assert lines[0].startswith(f"  traces: {t.traces} (")
    assert f"{t.first_failing_step.traces} failed" in lines[0]
    assert lines[0].endswith(f"first failing step as labelled {a.correct}/{a.judged} (87.5%)")


def test_a_run_of_rows_alone_says_nothing_of_traces() -> None:
    report = golden("expected-report.json")
    assert report.traces is None and trace_tables(None) == []
    assert "traces" not in report_markdown(report).casefold()
    assert "traces:" not in summary_text(report)
