"""The whole ``ragbatch`` command line: the ``run`` app of :mod:`ragbatch.cli._run_app` with
every other command added, in the order ``ragbatch --help`` lists them (no evaluation logic).

Every :class:`~ragbatch.core._errors.RagbatchError` is reported once, as ``error: <message>`` on
stderr with its documented exit code and no traceback.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ragbatch._files import write_bytes
from ragbatch.cli._cache_app import cache_app
from ragbatch.cli._common import check_output_paths, fail
from ragbatch.cli._export import export_command
from ragbatch.cli._labels import audit_sample_command, gate_command, infer_command
from ragbatch.cli._parse import parse_command
from ragbatch.cli._probe import probe_command
from ragbatch.cli._run_app import app
from ragbatch.cli._tools import (
    agreement_command,
    calibrate_command,
    counterfactual_command,
    diff_command,
    estimate_command,
    merge_command,
)
from ragbatch.cli._watch import watch_command
from ragbatch.core import RagbatchError
from ragbatch.report import report_schema

__all__ = ["app"]

app.command("parse")(parse_command)  # next to run: what a run of the same options would judge


@app.command()
def schema(
    out: Annotated[Path, typer.Option(help="Where to write the JSON Schema.")] = Path(
        "reports/report.schema.json"
    ),
) -> None:
    """Write the JSON Schema of the report, generated from its models."""
    try:
        check_output_paths(("--out", out))
        write_bytes(out, report_schema())
    except RagbatchError as error:
        raise fail(error) from None
    typer.echo(f"wrote {out}")


app.add_typer(cache_app, name="cache")
for name, command in (
    ("calibrate", calibrate_command),
    ("audit-sample", audit_sample_command),
    ("agreement", agreement_command),
    ("counterfactual", counterfactual_command),
    ("estimate", estimate_command),
    ("merge", merge_command),
    ("gate", gate_command),
    ("infer", infer_command),
    ("probe", probe_command),
    ("diff", diff_command),
    ("export", export_command),
    ("watch", watch_command),
):
    app.command(name)(command)
