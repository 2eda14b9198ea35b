"""The ``ragbatch`` command line: options -> JobConfig -> job (no evaluation logic here).

Every :class:`~ragbatch.errors.RagbatchError` is reported once, as ``error: <message>`` on
stderr with its documented exit code and no traceback.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from ragbatch.errors import EXIT_OK, EXIT_ROW_FAILURES, RagbatchError
from ragbatch.job import DEFAULT_DATASET, DEFAULT_OUT, DEFAULT_PRICING, JobConfig, run_job
from ragbatch.policy import Thresholds
from ragbatch.render import summary_text

app = typer.Typer(
    name="ragbatch",
    help="Evaluate RAG systems at scale with TypeSafe's Jev: per-row retrieval/generation "
    "diagnosis, Jev-only / baseline / cascade modes, calibrated metrics, deterministic report.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def fail(error: RagbatchError) -> typer.Exit:
    typer.echo(f"error: {error}", err=True)
    return typer.Exit(error.exit_code)


@app.command()
def run(
    dataset: Annotated[
        Path, typer.Argument(help="JSONL dataset, one row per line (see README: Dataset).")
    ] = DEFAULT_DATASET,
    out: Annotated[Path, typer.Option(help="Where to write the report JSON.")] = DEFAULT_OUT,
    provider: Annotated[
        str, typer.Option(help="Who answers the Jev questions: 'mock' (the rows' mock blocks).")
    ] = "mock",
    model: Annotated[
        str | None, typer.Option(help="Model to request (default: the provider's own).")
    ] = None,
    concurrency: Annotated[int, typer.Option(min=1, help="Maximum calls in flight at once.")] = 32,
    fail_threshold: Annotated[
        float, typer.Option(help="P(true) at or below this is a confident 'no'.")
    ] = 0.2,
    pass_threshold: Annotated[
        float, typer.Option(help="P(true) at or above this is a confident 'yes'.")
    ] = 0.8,
    pricing: Annotated[
        Path, typer.Option(help="Versioned pricing snapshot (JSON) used to price usage.")
    ] = DEFAULT_PRICING,
    baseline: Annotated[
        str, typer.Option(help="Fallback judge: 'recorded' (the rows' baseline verdicts).")
    ] = "recorded",
    ignore_unknown_fields: Annotated[
        bool, typer.Option(help="Skip unknown top-level fields instead of failing.")
    ] = False,
    run_record: Annotated[
        Path | None,
        typer.Option(help="Also write run timings (not part of the deterministic report)."),
    ] = None,
    quiet: Annotated[bool, typer.Option(help="Print nothing but errors.")] = False,
) -> None:
    """Evaluate DATASET and write a deterministic report.

    Exit codes: 0 all rows judged; 2 bad input or options; 3 report written but some rows
    failed; 4 run aborted.
    """
    try:
        config = JobConfig(
            dataset=dataset,
            out=out,
            provider=provider,
            model=model,
            concurrency=concurrency,
            thresholds=Thresholds(fail_threshold, pass_threshold),
            pricing=pricing,
            baseline=baseline,
            ignore_unknown_fields=ignore_unknown_fields,
            run_record=run_record,
        )
        result = run_job(config)
    except RagbatchError as error:
        raise fail(error) from None
    if not quiet:
        typer.echo(summary_text(result.report))
        typer.echo(f"  report: {out}", err=False)
    failed = result.report.modes.jev_only.failures.count
    raise typer.Exit(EXIT_ROW_FAILURES if failed else EXIT_OK)


@app.callback()
def _root() -> None:
    """ragbatch: evaluate RAG logs with Jev."""


def main() -> None:
    """Console entry point."""
    sys.exit(app())
