"""``ragbatch export``: a report's per-row verdicts (a trace's, and its failing step's) as
Phoenix span annotations or Langfuse scores, one JSON object a line, ready for those tools' own
upload clients (file I/O)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, cast

import orjson
import typer

from ragbatch._files import write_bytes
from ragbatch.cli._common import check_output_paths, fail, read_report
from ragbatch.core import ConfigError, DatasetError, RagbatchError
from ragbatch.report import DEFAULT_NAME, EXPORT_FORMATS, ExportFormat, export_rows

SHOWN = 10  # skipped rows named on stderr


def rows_of(path: Path) -> Iterator[dict[str, Any]]:
    """A report's ``rows[]``, or a ``--rows-out`` file's lines (``.jsonl``), in order."""
    if path.suffix.lower() != ".jsonl":
        report = read_report(path)
        if report.get("rowsOmitted") and not report["rows"]:
            raise ConfigError(
                f"{path}: the report kept no per-row results ({report['rowsOmitted']['reason']}); "
                "export the run's --rows-out file instead"
            )
        yield from report["rows"]
        return
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise ConfigError(f"cannot read rows file {path}: {exc.strerror or exc}") from None
    with handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                row = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                raise DatasetError(str(path), number, f"invalid JSON: {exc}") from None
            if not isinstance(row, dict) or "id" not in row:
                raise DatasetError(str(path), number, "expected a row result (an object with id)")
            yield row


def export_command(
    report: Annotated[
        Path, typer.Argument(help="A report JSON, or a --rows-out JSONL (for big runs).")
    ],
    format: Annotated[
        str,
        typer.Option(
            "--format",
            help="phoenix (span annotations: span_id, name, annotator_kind, label, score, "
            "explanation, metadata) or langfuse (scores: traceId, observationId, name, value, "
            "dataType, comment).",
        ),
    ],
    out: Annotated[Path, typer.Option(help="Where to write the records (JSON lines).")],
    name: Annotated[str, typer.Option(help="Annotation / score name.")] = DEFAULT_NAME,
) -> None:
    """Write each row's verdict for upload to Phoenix or Langfuse.

    Rows need the trace's ids (rows read with --format openinference or langfuse carry
    them): rows without one, and failed rows, are skipped and named on stderr. A multi-step
    trace's verdict goes on its root span (Langfuse: the trace, or the session), and its first
    failing step's (an uncertain trace's deciding step's) on that step's span (NAME.step) or
    observation (NAME.step.diagnosis); a step without a span id falls back to the trace's, and
    its explanation says so. Exit 0 written, 2 bad input or no row could be exported.
    """
    try:
        if format not in EXPORT_FORMATS:
            raise ConfigError(
                f"unknown export format {format!r}; choose from {', '.join(EXPORT_FORMATS)}"
            )
        check_output_paths(("--out", out))
        rows = list(rows_of(report))
        exported = export_rows(rows, cast(ExportFormat, format), name)
        if not exported.records:
            reasons = sorted({reason for _, reason in exported.skipped})
            raise ConfigError(
                f"{report}: none of the {len(rows)} rows can be exported to {format} "
                f"({'; '.join(reasons) or 'no rows'}); trace and span ids come from rows read "
                "with --format openinference or --format langfuse"
            )
        write_bytes(out, b"".join(orjson.dumps(r) + b"\n" for r in exported.records))
    except RagbatchError as error:
        raise fail(error) from None
    if exported.skipped:
        shown = ", ".join(f"{key} ({reason})" for key, reason in exported.skipped[:SHOWN])
        more = f" and {len(exported.skipped) - SHOWN} more" if len(exported.skipped) > SHOWN else ""
        typer.echo(f"warning: skipped {len(exported.skipped)} rows: {shown}{more}", err=True)
    what = "span annotations" if format == "phoenix" else "scores"
    typer.echo(f"wrote {len(exported.records)} {format} {what} for "
               f"{len(rows) - len(exported.skipped)} rows to {out}")  # fmt: skip
