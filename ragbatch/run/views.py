"""The human views of a finished report, written beside it (file I/O).

Markdown for a PR comment, one self-contained HTML page. The HTML shows questions and
answers (claim spans highlighted); neither is in the report, so the rows are read again.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from ragbatch.core.schema import Row
from ragbatch.data.formats import open_dataset
from ragbatch.files import write_bytes
from ragbatch.report.html import report_html
from ragbatch.report.markdown import report_markdown
from ragbatch.report.models import Report
from ragbatch.run.config import JobConfig


def reread(config: JobConfig) -> Iterable[Row]:
    """The run's rows read again from its dataset, in its format (for the HTML view)."""
    return open_dataset(
        config.dataset,
        config.format,
        mapping=config.mapping,
        outputs=config.outputs,
        ignore_unknown_fields=config.ignore_unknown_fields,
    )


def write_views(
    report: Report, rows: Iterable[Row], markdown: Path | None, html: Path | None
) -> None:
    """Write the views asked for; ``rows`` (read only for the HTML) are the run's rows."""
    if markdown is not None:
        write_bytes(markdown, report_markdown(report).encode())
    if html is not None:
        texts = {row.id: (row.question, row.answer) for row in rows}
        questions = {key: question for key, (question, _) in texts.items()}
        answers = {key: answer for key, (_, answer) in texts.items()}
        write_bytes(html, report_html(report, answers, questions).encode())
