"""The ``ragbatch`` command line: options -> JobConfig -> job (no evaluation logic here).

Every :class:`~ragbatch.core.errors.RagbatchError` is reported once, as ``error: <message>`` on
stderr with its documented exit code and no traceback.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Annotated

import typer

from ragbatch.cli.export import export_command
from ragbatch.cli.tools import register
from ragbatch.cli.usage import OneLineErrors
from ragbatch.core.errors import (
    EXIT_INCOMPLETE,
    EXIT_OK,
    EXIT_ROW_FAILURES,
    Interrupted,
    RagbatchError,
)
from ragbatch.core.questions import MAX_REQUEST_TOKENS, MAX_STATE_QUESTION_TOKENS
from ragbatch.data.output import check_output
from ragbatch.providers.jev import DEFAULT_BASE_URL
from ragbatch.report.html import require_html_extra
from ragbatch.report.models import report_schema
from ragbatch.report.text import run_text, summary_text
from ragbatch.run.cluster import run_on_cluster
from ragbatch.run.job import (
    DEFAULT_CACHE,
    DEFAULT_DATASET,
    DEFAULT_OUT,
    DEFAULT_PRICING,
    PRICING_NAME,
    run_job,
    write_bytes,
)
from ragbatch.run.options import RunOptions, job_config
from ragbatch.run.stop import StopWatch
from ragbatch.run.views import reread, write_views
from ragbatch.run.workers import run_workers

app = typer.Typer(
    cls=OneLineErrors,
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
    format: Annotated[
        str,
        typer.Option(
            "--format",
            help="Dataset format: jsonl (ragbatch rows), ragas (JSONL, JSON array or CSV with "
            "ragas v0.2 or v0.1 columns), csv (with --mapping), golden-yaml (DATASET is "
            "golden_set.yaml, joined with --outputs), deepeval (test cases: JSON, JSONL, CSV), "
            "openinference (OTLP JSON or a Phoenix spans export: JSONL, Parquet), langfuse "
            "(traces with observations, or observations). See README: Formats.",
        ),
    ] = "jsonl",
    mapping: Annotated[
        str | None,
        typer.Option(
            help="csv: field=column pairs, e.g. question=query,answer=response,contexts=ctx"
        ),
    ] = None,
    outputs: Annotated[
        Path | None, typer.Option(help="golden-yaml: the JSONL of system outputs to join.")
    ] = None,
    provider: Annotated[
        str,
        typer.Option(
            help="Who answers the Jev questions: 'mock' (the rows' mock blocks, offline) or "
            "'jev' (the live API, through the reply cache)."
        ),
    ] = "mock",
    model: Annotated[
        str | None,
        typer.Option(
            envvar="TYPESAFE_DEFAULT_MODEL",
            help="Model to request: jev-latest (default for jev), jev-preview or a pinned "
            "release such as jev-1.13.0.",
        ),
    ] = None,
    base_url: Annotated[
        str, typer.Option(envvar="TYPESAFE_BASE_URL", help="Jev API base URL.")
    ] = DEFAULT_BASE_URL,
    allow_insecure_http: Annotated[
        bool,
        typer.Option(
            "--allow-insecure-http",
            help="Send the API keys over plain http:// to a host that is not loopback "
            "(refused otherwise: the key would travel unencrypted).",
        ),
    ] = False,
    api_key: Annotated[
        str | None,
        typer.Option(
            envvar="TYPESAFE_API_KEY",
            show_default=False,
            help="Jev API key (prefer the environment variable; never written anywhere).",
        ),
    ] = None,
    cache_dir: Annotated[
        Path, typer.Option(help="Content-addressed reply cache directory.")
    ] = DEFAULT_CACHE,
    offline: Annotated[
        bool,
        typer.Option(
            "--offline", help="Answer from the cache only; a miss fails the row (cache-miss)."
        ),
    ] = False,
    refresh: Annotated[
        bool,
        typer.Option("--refresh", help="Ignore cached replies, fetch again and overwrite them."),
    ] = False,
    no_cache: Annotated[
        bool, typer.Option("--no-cache", help="Neither read nor write the cache.")
    ] = False,
    timeout: Annotated[
        float,
        typer.Option(min=0.001, help="Seconds per HTTP attempt, the whole reply included."),
    ] = 30.0,
    row_deadline: Annotated[
        float, typer.Option(min=0.001, help="Seconds per row, all attempts and waits included.")
    ] = 300.0,
    max_retries: Annotated[
        int, typer.Option(min=0, help="Retries after the first attempt (408/429/5xx/network).")
    ] = 4,
    max_rps: Annotated[
        float | None, typer.Option(min=0.001, help="Ceiling on requests per second.")
    ] = None,
    max_tokens_per_s: Annotated[
        float | None,
        typer.Option(min=1, help="Ceiling on input tokens per second (reserved by estimate)."),
    ] = None,
    max_request_tokens: Annotated[
        int,
        typer.Option(min=1, help="Estimated input tokens per request above which it is not sent."),
    ] = MAX_REQUEST_TOKENS,
    max_state_question_tokens: Annotated[
        int,
        typer.Option(min=1, help="The same for the state plus the longest question."),
    ] = MAX_STATE_QUESTION_TOKENS,
    adaptive: Annotated[
        bool, typer.Option(help="Halve concurrency on 429/529, grow back slowly on success.")
    ] = True,
    max_error_rate: Annotated[
        float | None,
        typer.Option(
            min=0.0, max=1.0, help="Abort (exit 4) once more than this share of rows failed."
        ),
    ] = None,
    error_budget_rows: Annotated[
        int, typer.Option(min=1, help="Rows done before --max-error-rate is enforced.")
    ] = 20,
    concurrency: Annotated[int, typer.Option(min=1, help="Maximum calls in flight at once.")] = 32,
    fail_threshold: Annotated[
        float | None,
        typer.Option(
            show_default=False, help="P(true) at or below this is a confident 'no' (default 0.2)."
        ),
    ] = None,
    pass_threshold: Annotated[
        float | None,
        typer.Option(
            show_default=False, help="P(true) at or above this is a confident 'yes' (default 0.8)."
        ),
    ] = None,
    routing: Annotated[
        str | None,
        typer.Option(
            show_default=False,
            help="How the precedence is walked: 'showcase' (default; the first rule that "
            "fires wins) or 'guarded' (automatic only when every earlier rule is confidently "
            "ruled out; what a risk guarantee needs). A --policy file brings its own.",
        ),
    ] = None,
    pricing: Annotated[
        Path,
        typer.Option(
            help="Versioned pricing snapshot (JSON) used to price usage.",
            show_default=f"{PRICING_NAME} (bundled)",
        ),
    ] = DEFAULT_PRICING,
    baseline: Annotated[
        str,
        typer.Option(
            help="Fallback judge: 'recorded' (the rows' baseline verdicts), 'lexical' (a "
            "deterministic overlap check, offline) or 'llm' (an OpenAI-compatible judge)."
        ),
    ] = "recorded",
    judge_base_url: Annotated[
        str, typer.Option(envvar="RAGBATCH_JUDGE_BASE_URL", help="LLM judge base URL.")
    ] = "https://api.openai.com",
    judge_model: Annotated[
        str, typer.Option(envvar="RAGBATCH_JUDGE_MODEL", help="LLM judge model.")
    ] = "gpt-4o-mini",
    judge_api_key: Annotated[
        str | None,
        typer.Option(envvar="RAGBATCH_JUDGE_API_KEY", show_default=False, help="LLM judge key."),
    ] = None,
    policy: Annotated[
        Path | None,
        typer.Option(help="Calibrated policy file (ragbatch calibrate): its thresholds win."),
    ] = None,
    markdown: Annotated[
        Path | None, typer.Option(help="Also write a Markdown summary (PR comment).")
    ] = None,
    html: Annotated[
        Path | None, typer.Option(help="Also write a self-contained HTML report.")
    ] = None,
    ignore_unknown_fields: Annotated[
        bool,
        typer.Option(
            "--ignore-unknown-fields", help="Skip unknown top-level fields instead of failing."
        ),
    ] = False,
    groundedness: Annotated[
        str,
        typer.Option(
            help="'basic' judges the answer as a whole; 'claims' judges each claim against "
            "its evidence and fails the answer on one bad material claim."
        ),
    ] = "basic",
    claim_evidence: Annotated[
        str,
        typer.Option(
            help="Claim mode evidence: 'cited' (only the passages a claim cites) or 'context' "
            "(every retrieved passage)."
        ),
    ] = "cited",
    claim_extractor: Annotated[
        str,
        typer.Option(
            help="Claim mode: 'provided' (the rows' claims) or 'sentences' (one per sentence)."
        ),
    ] = "provided",
    slice_by: Annotated[
        list[str] | None,
        typer.Option(help="Metadata field to slice metrics by (repeatable; dotted for nested)."),
    ] = None,
    k: Annotated[
        list[int] | None,
        typer.Option("--k", help="Cut-offs for retrieval ranking metrics (repeatable).", min=1),
    ] = None,
    rows_out: Annotated[
        Path | None,
        typer.Option(
            help="Stream per-row results to this JSONL, in input order, as rows complete."
        ),
    ] = None,
    max_report_rows: Annotated[
        int,
        typer.Option(
            min=0,
            help="Above this many rows the report keeps aggregates only (use --rows-out).",
        ),
    ] = 10_000,
    progress_interval: Annotated[
        float, typer.Option(min=0.0, help="Seconds between plain progress lines (non-terminal).")
    ] = 5.0,
    max_cost: Annotated[
        float | None,
        typer.Option(
            min=0.0,
            help="Never spend more than this (USD, pricing snapshot): stop sending, write an "
            "incomplete report, exit 5; rerun with more to resume from the cache.",
        ),
    ] = None,
    shard: Annotated[
        str | None,
        typer.Option(help="Evaluate only shard K/N (rows by hash of id); needs --partial-out."),
    ] = None,
    partial_out: Annotated[
        Path | None, typer.Option(help="Where a shard writes its partial result.")
    ] = None,
    workers: Annotated[
        int,
        typer.Option(min=1, help="Processes on this machine (shards merged at the end)."),
    ] = 1,
    run_record: Annotated[
        Path | None,
        typer.Option(help="Also write run timings (not part of the deterministic report)."),
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", help="Print nothing but errors.")] = False,
    dask: Annotated[
        str | None,
        typer.Option(help="Run on a Dask cluster: tcp://HOST:8786, or local:N worker processes."),
    ] = None,
) -> None:
    """Evaluate DATASET and write a deterministic report.

    Exit codes: 0 all rows judged; 2 bad input or options; 3 report written but some rows
    failed; 4 run aborted (key rejected, error budget); 5 --max-cost reached (incomplete
    report; rerun with more to resume from the cache); 130/143 stopped by SIGINT/SIGTERM
    (nothing written; rerun to resume from the cache).
    """
    params = dict(locals())
    options = RunOptions(**params)  # every parameter, by name: a new one must be added there
    try:
        config = job_config(options)
        for option, view in (("--markdown", markdown), ("--html", html)):
            if view is not None:
                check_output(view, option)
        if html is not None:
            require_html_extra()  # before the first row, not after the whole run
        warn = lambda text: typer.echo(f"warning: {text}", err=True)  # noqa: E731
        if dask is not None:
            result = run_on_cluster(config, dask)
        elif workers > 1:
            result = run_workers(config, workers, warn)
        else:
            result = run_job(config, warn=warn, stop=StopWatch())
    except RagbatchError as error:
        raise fail(error) from None
    except KeyboardInterrupt:  # SIGINT outside the run's own handling (start-up, a second one)
        raise fail(Interrupted("interrupted by SIGINT", signal.SIGINT)) from None
    try:
        write_views(result.report, reread(config) if html else (), markdown, html)
    except RagbatchError as error:
        raise fail(error) from None
    if not quiet:
        typer.echo(summary_text(result.report, result.record))
        typer.echo(run_text(result.record))
        if rows_out is not None:
            typer.echo(f"  per-row results: {rows_out}")
        for label, path in (("markdown", markdown), ("html", html)):
            if path is not None:
                typer.echo(f"  {label}: {path}")
        if partial_out is not None and shard:
            typer.echo(f"  partial result (shard {shard}): {partial_out}")
        else:
            typer.echo(f"  report: {out}")
        if run_record is not None:
            typer.echo(f"  run record: {run_record}")
    if result.report.incomplete is not None:
        typer.echo(
            f"incomplete: {result.report.incomplete.rows_not_evaluated} rows not evaluated "
            "(budget reached); rerun with a larger --max-cost to resume from the cache",
            err=True,
        )
        raise typer.Exit(EXIT_INCOMPLETE)
    failed = result.report.modes.jev_only.failures.count
    raise typer.Exit(EXIT_ROW_FAILURES if failed else EXIT_OK)


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


@app.callback()
def _root() -> None:
    """ragbatch: evaluate RAG logs with Jev."""


def main() -> None:
    """Console entry point."""
    sys.exit(app())
