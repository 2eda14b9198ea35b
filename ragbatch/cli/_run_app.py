"""The ``ragbatch`` app with its ``run`` command only: what ``ragbatch run`` imports (the
other commands, in :mod:`ragbatch.cli._app`, import calibration, comparison, the cache tools and
the exporters, which a run does not use; ``ragbatch.cli.main`` picks this app for ``run``).

Every :class:`~ragbatch.core._errors.RagbatchError` is reported once, as ``error: <message>`` on
stderr with its documented exit code and no traceback.
"""

from __future__ import annotations

import signal
from typing import Any

import typer

from ragbatch.cli._common import fail
from ragbatch.cli._meta import HELP_OPTIONS, VersionFlag
from ragbatch.cli._run_command import with_run_options
from ragbatch.cli._usage import OneLineErrors
from ragbatch.core import EXIT_INCOMPLETE, EXIT_OK, EXIT_ROW_FAILURES, Interrupted, RagbatchError
from ragbatch.providers import OVERLAP_MODEL
from ragbatch.report import run_text, summary_text
from ragbatch.run import RunCanceller, RunOptions
from ragbatch.run import run as run_options

app = typer.Typer(
    cls=OneLineErrors,
    name="ragbatch",
    help="Evaluate RAG systems at scale with TypeSafe's Jev: per-row retrieval/generation "
    "diagnosis, Jev-only / baseline / cascade modes, calibrated metrics, deterministic report.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings=HELP_OPTIONS,
    rich_markup_mode=None,  # plain help: see ragbatch.cli._meta
)


def warn(text: str) -> None:
    """A ``warning:`` line on stderr (the run goes on)."""
    typer.echo(f"warning: {text}", err=True)


@app.command()
@with_run_options
def run(**params: Any) -> None:
    """Evaluate DATASET and write a deterministic report.

    Exit codes: 0 all rows judged; 2 bad input or options; 3 report written but some rows
    failed; 4 run aborted (key rejected, error budget); 5 --max-cost reached (incomplete
    report; rerun with more to resume from the cache); 130/143 stopped by SIGINT/SIGTERM
    (nothing written; rerun to resume from the cache).
    """
    options = RunOptions.of(**params)
    try:
        result = run_options(options, warn, RunCanceller())
    except RagbatchError as error:
        raise fail(error) from None
    except KeyboardInterrupt:  # SIGINT outside the run's own handling (start-up, a second one)
        raise fail(Interrupted("interrupted by SIGINT", signal.SIGINT)) from None
    if OVERLAP_MODEL in result.report.provider.answered_by:
        warn(
            "rows without a mock block were answered by word overlap (model "
            f"{OVERLAP_MODEL}): a stand-in that runs offline, not Jev's judgment; judge them "
            "with --provider jev"
        )
    if not options.display.quiet:
        typer.echo(summary_text(result.report, result.record))
        typer.echo(run_text(result.record))
        typer.echo(files_text(options))
    if result.report.incomplete is not None:
        typer.echo(
            f"incomplete: {result.report.incomplete.rows_not_evaluated} rows not evaluated "
            "(budget reached); rerun with a larger --max-cost to resume from the cache",
            err=True,
        )
        raise typer.Exit(EXIT_INCOMPLETE)
    failed = result.report.modes.jev_only.failures.count
    raise typer.Exit(EXIT_ROW_FAILURES if failed else EXIT_OK)


def files_text(o: RunOptions) -> str:
    """Where the run's files went, one line each."""
    out, scale = o.output, o.scale
    lines = [f"  per-row results: {out.rows_out}"] if out.rows_out is not None else []
    lines += [f"  {label}: {path}" for label, path in (("markdown", out.markdown),
              ("html", out.html)) if path is not None]  # fmt: skip
    if scale.partial_out is not None and scale.shard:
        lines.append(f"  partial result (shard {scale.shard}): {scale.partial_out}")
    else:
        lines.append(f"  report: {out.out}")
    if out.run_record is not None:
        lines.append(f"  run record: {out.run_record}")
    return "\n".join(lines)


@app.callback()
def _root(version: VersionFlag = False) -> None:
    """ragbatch: evaluate RAG logs with Jev."""
