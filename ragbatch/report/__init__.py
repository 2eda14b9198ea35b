"""The report: its models and deterministic bytes, the builder, and every view of it.

Owns the report models (``models``), the streaming builder that turns row outcomes into the
three modes (``builder``, ``modes``) and per-row results (``rows``), the ``--rows-out``
writer (``rows_out``), and the views: text summary (``text``), tables, Markdown, HTML and
its charts, the corrected-rates section (``inference_view``) and the judge audit's
(``audit_view``: also the warning calibrate and infer give on a flagged judgment); typed partial views of a
report read back (``views``: rows by the models' field names, for calibration and compare).

Pure except ``rows_out`` (writes the JSONL stream) and ``html`` (loads its template from the
package); ``charts`` needs the ``html`` extra. May import ``metrics`` and ``core``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ragbatch._lazy import lazy_exports

# The front door: what other packages use (the modules behind it are private). What a run
# does not need (the views, exports and merge) is imported on first use: start-up.
from ragbatch.report._audit_view import audit_warning
from ragbatch.report._builder import ROWS_IN_FILE, ROWS_NOT_KEPT, ReportBuilder, RunInfo, summarize
from ragbatch.report._models import (
    DatasetInfo,
    Report,
    RowResult,
    WatchWindow,
    report_bytes,
    report_json,
    report_schema,
    row_json,
)
from ragbatch.report._rows_out import RowsWriter, merge_rows
from ragbatch.report._text import run_text, summary_text

if TYPE_CHECKING:
    from ragbatch.report._export import DEFAULT_NAME, EXPORT_FORMATS, ExportFormat, export_rows
    from ragbatch.report._html import report_html, require_html_extra
    from ragbatch.report._markdown import report_markdown
    from ragbatch.report._merge import merge_builders
    from ragbatch.report._views import (
        ROW_FIELDS,
        DatasetView,
        ReportView,
        RowView,
        report_view,
        row_view,
    )

__getattr__ = lazy_exports(
    __name__,
    {
        "_export": ("DEFAULT_NAME", "EXPORT_FORMATS", "ExportFormat", "export_rows"),
        "_html": ("report_html", "require_html_extra"),
        "_markdown": ("report_markdown",),
        "_merge": ("merge_builders",),
        "_views": ("ROW_FIELDS", "DatasetView", "ReportView", "RowView", "report_view", "row_view"),
    },
)

__all__ = [
    "DEFAULT_NAME",
    "EXPORT_FORMATS",
    "ROWS_IN_FILE",
    "ROWS_NOT_KEPT",
    "ROW_FIELDS",
    "DatasetInfo",
    "DatasetView",
    "ExportFormat",
    "Report",
    "ReportBuilder",
    "ReportView",
    "RowResult",
    "RowView",
    "RowsWriter",
    "RunInfo",
    "WatchWindow",
    "audit_warning",
    "export_rows",
    "merge_builders",
    "merge_rows",
    "report_bytes",
    "report_html",
    "report_json",
    "report_markdown",
    "report_schema",
    "report_view",
    "require_html_extra",
    "row_json",
    "row_view",
    "run_text",
    "summarize",
    "summary_text",
]
