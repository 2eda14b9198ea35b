"""The report as Markdown for a pull-request comment or ``$GITHUB_STEP_SUMMARY`` (pure: no I/O).

The sections are the tables of :mod:`ragbatch.tables` (numbers rounded for humans; the JSON
stays exact), each a heading, a pipe table and a note; sections the report lacks are left out.
"""

from __future__ import annotations

from ragbatch.report import Report
from ragbatch.tables import Table, heading_text, limits_text, numeric_columns, report_tables


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


def report_markdown(report: Report) -> str:
    """A Markdown summary of the report; numbers rounded for humans, sections only if present."""
    parts = [f"## ragbatch report: {_cell(report.dataset.name)}", "", heading_text(report), ""]
    parts += [table_markdown(t) for t in report_tables(report)]
    parts += ["### Limits", "", limits_text(report), ""]
    return "\n".join(parts)
