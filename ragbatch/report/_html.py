"""The report as ONE self-contained HTML page (pure: returns a string, fetches and writes nothing).

The page needs no network at view time: CSS and a small filter script are inline, the charts
are inline SVG drawn by matplotlib (:mod:`ragbatch.report._charts`), and the page is rendered by a
jinja2 template (``templates/report.html.j2``) with autoescaping on, so dataset text (ids,
answers, failure messages) can never become markup. Tables are those of the Markdown summary
(:mod:`ragbatch.report._tables`), so both views round alike; the JSON stays exact.

In claim mode the spans of contradicted, insufficient and missing-citation claims are marked in
the answer text by their ``start``/``end`` offsets. The report does not carry answer texts, so
they come from ``answers`` (row id → answer, e.g. read from the dataset) or, when a report has
them, from ``rows[].answer``. jinja2 and matplotlib are the ``html`` extra, imported lazily.

A multi-step trace's row is also drawn as a timeline of its steps (:mod:`ragbatch.report._timeline`),
with the steps' texts from ``traces`` (row id → the trace the run read) when given.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ragbatch.core import ConfigError, Trace, install_extra
from ragbatch.report._audit_view import audit_table, bar_scale, flip_svg
from ragbatch.report._builder import ROWS_IN_FILE
from ragbatch.report._inference_view import inference_table, interval_svg
from ragbatch.report._models import ClaimOut, Report, RowResult
from ragbatch.report._tables import (
    diagnostics_table,
    guarantee_text,
    heading_text,
    limits_text,
    modes_of,
    num,
    numeric_columns,
    report_tables,
)
from ragbatch.report._tables import slices_table as slices_table_of
from ragbatch.report._timeline import trace_views
from ragbatch.report._trace_tables import trace_tables

ROW_CAP = 2_000
MARKED_VERDICTS = ("contradicted", "insufficient", "missing-citation")
SHADES = 10
EXTRA_MODULES = {"jinja2", "markupsafe", "matplotlib"}
MISSING_EXTRA = f"the HTML report needs the 'html' extra: {install_extra('html')}"


@dataclass(frozen=True, slots=True)
class Segment:
    """A piece of an answer; ``verdict`` set when it is a marked claim span."""

    text: str
    verdict: str | None = None
    title: str = ""


@dataclass(frozen=True, slots=True)
class RowView:
    id: str
    question: str
    diagnosis: str
    route: str
    expected: str
    confidence: str
    mismatch: bool
    segments: list[Segment]
    # Marked claims, listed when the answer text is not known (nothing to highlight in).
    unplaced: list[Segment] = field(default_factory=list)


def _claim_title(claim: ClaimOut) -> str:
    return f"{claim.id}: {claim.verdict} (confidence {claim.confidence:.2f})"


def answer_segments(answer: str, claims: Sequence[ClaimOut]) -> list[Segment]:
    """The answer cut into plain and marked pieces; joined, the pieces give back the answer.

    Marked: claims whose verdict is contradicted, insufficient or missing-citation. Offsets are
    clipped to the text; a span overlapping an earlier marked one keeps only its new part.
    """
    marked = sorted(
        (c for c in claims if c.verdict in MARKED_VERDICTS), key=lambda c: (c.start, c.end)
    )
    segments: list[Segment] = []
    position = 0
    for claim in marked:
        start, end = max(claim.start, position), min(claim.end, len(answer))
        if start >= end:
            continue
        if start > position:
            segments.append(Segment(answer[position:start]))
        segments.append(Segment(answer[start:end], claim.verdict, _claim_title(claim)))
        position = end
    if position < len(answer):
        segments.append(Segment(answer[position:]))
    return segments


def _row_view(row: RowResult, answer: str | None, question: str | None) -> RowView:
    diagnosis: str = row.diagnosis or (f"failed ({row.error.kind})" if row.error else "failed")
    claims = row.claims or []
    marked = [c for c in claims if c.verdict in MARKED_VERDICTS]
    return RowView(
        id=row.id,
        question=question if question is not None else "—",
        diagnosis=diagnosis,
        route=row.route,
        expected=row.expected or "—",
        confidence=num(row.confidence, 2) if row.confidence is not None else "—",
        mismatch=row.expected is not None and row.expected != row.diagnosis,
        segments=answer_segments(answer, claims) if answer is not None else [],
        unplaced=[]
        if answer is not None
        else [Segment(c.id, c.verdict, _claim_title(c)) for c in marked],
    )


def _texts(dump: Mapping[str, Any], field: str, given: Mapping[str, str] | None) -> dict[str, str]:
    """Row id → ``field`` text: from ``rows[]`` when a report carries it, then ``given``."""
    found = {str(r["id"]): r[field] for r in dump.get("rows", []) if isinstance(r.get(field), str)}
    return found | dict(given or {})


def omitted_note(report: Report) -> str | None:
    """Why the Rows section is empty on a report above ``--max-report-rows``, and where the
    rows are (the ``--rows-out`` file) or how to get them."""
    omitted = report.rows_omitted
    if omitted is None:
        return None
    head = (
        f"No rows shown: the run had {omitted.rows:,} rows, more than --max-report-rows "
        f"{omitted.limit}, so the report keeps aggregates only."
    )
    if omitted.reason == ROWS_IN_FILE:
        return head + " The per-row results are in the --rows-out file of the run (JSONL)."
    return head + (
        " No --rows-out was given, so they were not kept: rerun with --rows-out PATH (cached "
        "rows are free) or a larger --max-report-rows to see them."
    )


def confusion_view(report: Report) -> dict[str, Any]:
    """Jev-only confusion matrix with a shade level 0..10 per cell (share of the largest cell)."""
    confusion = report.modes.jev_only.classification.confusion
    largest = max((n for row in confusion.matrix for n in row), default=0)
    rows = [
        {
            "label": label,
            "total": sum(counts),
            "cells": [
                {"count": n, "shade": round(SHADES * n / largest) if largest else 0, "diag": i == j}
                for j, n in enumerate(counts)
            ],
        }
        for i, (label, counts) in enumerate(zip(confusion.labels, confusion.matrix, strict=True))
    ]
    return {"labels": confusion.labels, "rows": rows}


def require_html_extra() -> None:
    """ConfigError (exit 2) unless the ``html`` extra imports: checked by ``run --html`` before
    the first row, so a base install does not find out after the whole run."""
    try:
        import jinja2  # noqa: F401
        import markupsafe  # noqa: F401

        from ragbatch.report import _charts as charts  # noqa: F401  (matplotlib)
    except ImportError as exc:
        if (exc.name or "").split(".")[0] not in EXTRA_MODULES:
            raise  # a bug, not a missing extra
        raise ConfigError(MISSING_EXTRA) from None


def audit_bars(report: Report) -> list[str]:
    """The judge audit's flip intervals as inline SVG bars, one per entry, on one scale."""
    from markupsafe import Markup

    audit = report.judge_audit
    if audit is None:
        return []
    scale = bar_scale(audit)
    return [Markup(flip_svg(e, scale, audit.max_flip_rate)) for e in audit.probes]


def report_html(
    report: Report,
    answers: Mapping[str, str] | None = None,
    questions: Mapping[str, str] | None = None,
    traces: Mapping[str, Trace] | None = None,
) -> str:
    """The report as one self-contained HTML page; ``answers`` (row id → answer text) lets
    claim spans be highlighted in the answers, ``questions`` (row id → question) fills the
    question column, and ``traces`` (row id → trace) gives a trace's timeline its steps'
    texts: the report itself carries none of them."""
    require_html_extra()
    import jinja2
    from markupsafe import Markup

    from ragbatch.report import _charts as charts  # matplotlib

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("ragbatch.report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["numeric_columns"] = numeric_columns
    dump = report.model_dump(by_alias=True)
    texts = _texts(dump, "answer", answers)
    asked = _texts(dump, "question", questions)
    shown = report.rows[:ROW_CAP]
    rows = [_row_view(row, texts.get(row.id), asked.get(row.id)) for row in shown]
    timelines = trace_views(shown, report.policy, traces)
    modes = modes_of(report)
    tables = [t for t in report_tables(report) if not t.title.startswith("Slices")]
    context = {
        "title": report.dataset.name,
        "heading": heading_text(report),
        "guarantee": guarantee_text(report),
        "headline": tables[0],
        "diagnostics": diagnostics_table(report),
        "side": tables[1:3],  # cascade, routes
        "details": tables[3:] + trace_tables(report.traces),  # where traces fail, if any
        "slices": slices_table_of(dump),
        "charts": {
            "reliability": Markup(charts.reliability_svg(modes)),
            "risk_coverage": Markup(charts.risk_coverage_svg(modes)),
            "tradeoff": Markup(charts.tradeoff_svg(report)),
            "sweep": Markup(charts.sweep_svg(report)) if report.tradeoff else None,
            "routing": (
                Markup(charts.routing_curves_svg(report)) if report.routing_curves else None
            ),
        },
        "confusion": confusion_view(report),
        "shades": range(SHADES + 1),
        "rows": rows,
        "traces": timelines,
        "traces_have_texts": all(t.has_texts for t in timelines),
        "total_rows": len(report.rows),
        "row_cap": ROW_CAP,
        "diagnoses": sorted(Counter(r.diagnosis for r in rows).items()),
        "has_answers": bool(texts),
        "labelled": any(r.expected is not None for r in shown),
        "omitted": omitted_note(report),
        "claim_mode": any(r.claims for r in shown),
        "limits": limits_text(report),
        "inference": inference_table(report.inference),
        "inference_bars": [
            Markup(interval_svg(e))
            for e in (report.inference.estimates if report.inference else [])
        ],
        "audit": audit_table(report.judge_audit),
        "audit_bars": audit_bars(report),
    }
    return str(env.get_template("report.html.j2").render(context))
