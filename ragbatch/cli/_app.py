"""The whole ``ragbatch`` command line: the ``run`` app of :mod:`ragbatch.cli._run_app` with
every other command added (no evaluation logic here).

Every :class:`~ragbatch.core._errors.RagbatchError` is reported once, as ``error: <message>`` on
stderr with its documented exit code and no traceback.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ragbatch._files import check_output, write_bytes
from ragbatch.cli._export import export_command
from ragbatch.cli._run_app import app, fail
from ragbatch.cli._tools import register
from ragbatch.core import RagbatchError
from ragbatch.report import report_schema

__all__ = ["app"]


@app.command()
def schema(
    out: Annotated[Path, typer.Option(help="Where to write the JSON Schema.")] = Path(
        "reports/report.schema.json"
    ),
) -> None:
    """Write the JSON Schema of the report, generated from its models."""
    try:
        check_output(out, "--out")
        write_bytes(out, report_schema())
    except RagbatchError as error:
        raise fail(error) from None
    typer.echo(f"wrote {out}")


register(app)
app.command("export")(export_command)
