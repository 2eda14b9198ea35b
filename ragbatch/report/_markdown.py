"""The report as Markdown for a pull-request comment or ``$GITHUB_STEP_SUMMARY`` (pure: no I/O).

The sections are the tables of :mod:`ragbatch.report._tables` (numbers rounded for humans; the JSON
stays exact), each a heading, a pipe table and a note; sections the report lacks are left out.
The diagnostic matrix (where to look first, upstream layer first) follows the headline; where
multi-step traces fail follows the failed rows.
"""

from __future__ import annotations

from ragbatch.report._audit_view import audit_table
from ragbatch.report._inference_view import inference_table
from ragbatch.report._models import Report
from ragbatch.report._tables import (
    FAILURES_TITLE,
    Table,
    diagnostics_table,
    guarantee_text,
    heading_text,
    limits_text,
    ms,
    num,
    numeric_columns,
    pct,
    report_tables,
    usd,
)
from ragbatch.report._trace_tables import trace_tables


def _cell(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def table_markdown(table: Table) -> str:
    lines = [f"### {_cell(table.title)}", ""]
    if table.rows:
        lines.append("| " + " | ".join(_cell(h) for h in table.headers) + " |")
        aligns = ("---:" if n else "---" for n in numeric_columns(table))
        lines.append("|" + "|".join(aligns) + "|")
        lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in table.rows]
        lines.append("")
    if table.note:
        lines += [table.note, ""]
    return "\n".join(lines)


def tradeoff_table(report: Report) -> Table | None:
    """Coverage, quality, cost and latency per threshold pair, cascade vs Jev-only."""
    if report.tradeoff is None:
        return None
    headers = (
        "fail / pass", "auto coverage", "Jev-only accuracy", "cascade accuracy",
        "cascade macro-F1", "cascade cost", "cascade p50", "cascade p95",
    )  # fmt: skip
    rows = tuple(
        (
            f"{p.fail_threshold:g} / {p.pass_threshold:g}"
            + (" (this run)" if p.policy == "run" else ""),
            pct(p.jev_only.coverage),
            pct(p.jev_only.accuracy),
            pct(p.cascade.accuracy),
            num(p.cascade.macro_f1),
            usd(p.cascade.cost_usd),
            ms(p.cascade.latency_p50_ms),
            ms(p.cascade.latency_p95_ms),
        )
        for p in report.tradeoff.points
    )
    b = report.tradeoff.points[0].baseline
    note = (
        f"Baseline alone: accuracy {pct(b.accuracy)}, cost {usd(b.cost_usd)}, p95 "
        f"{ms(b.latency_p95_ms)}. {report.tradeoff.note}"
    )
    return Table("Cascade trade-off", headers, rows, note)


def report_markdown(report: Report) -> str:
    """A Markdown summary of the report; numbers rounded for humans, sections only if present."""
    parts = [f"## ragbatch report: {_cell(report.dataset.name)}", "", heading_text(report), ""]
    answer = guarantee_text(report)
    if answer is not None:
        parts += [f"**{answer}**", ""]
    tables = report_tables(report)
    tradeoff = tradeoff_table(report)
    if tradeoff is not None:
        tables.insert(2, tradeoff)
    diagnostics = diagnostics_table(report)
    if diagnostics is not None:
        tables.insert(1, diagnostics)  # right under the headline: what to fix first
    # where traces fail, right after the failed rows (only a run with traces has them)
    after = next(i for i, t in enumerate(tables) if t.title == FAILURES_TITLE) + 1
    tables[after:after] = trace_tables(report.traces)
    inference = inference_table(report.inference)
    if inference is not None:
        tables.append(inference)  # only after `ragbatch infer`: goldens unchanged without it
    audit = audit_table(report.judge_audit)
    if audit is not None:
        tables.append(audit)  # only with --probe or `ragbatch probe`
    parts += [table_markdown(t) for t in tables]
    parts += ["### Limits", "", limits_text(report), ""]
    return "\n".join(parts)
