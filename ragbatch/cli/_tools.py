"""CLI commands around a run: estimate its cost, make counterfactual rows, merge shards, and
work on finished reports (diff, calibrate, agreement); file I/O, no evaluation logic.

Registered on the main app by :mod:`ragbatch.cli._app`. Every RagbatchError becomes one
``error:`` line with its exit code, as for ``run``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import orjson
import typer

from ragbatch._files import write_bytes
from ragbatch.calibrate import agreement, calibrate_targets, policy_bytes, summary
from ragbatch.cli._common import check_output_paths, fail, read_report
from ragbatch.cli._run_command import SOURCE, open_source, with_options
from ragbatch.compare import diff_markdown, diff_reports, distribution_drift, drift_markdown
from ragbatch.core import ConfigError, RagbatchError
from ragbatch.data import write_counterfactuals
from ragbatch.report import audit_warning, report_bytes, summarize
from ragbatch.run import RunOptions, estimate_options, merge_partials

TOO_LARGE_SHOWN = 20  # rows over a size limit listed by `estimate` (all of them with --json)


def diff_command(
    a: Annotated[Path, typer.Argument(help="The earlier report.")],
    b: Annotated[Path, typer.Argument(help="The later report.")],
    markdown: Annotated[Path | None, typer.Option(help="Also write the Markdown here.")] = None,
) -> None:
    """Rows whose diagnosis flipped, metric deltas, model and pricing changes, and drift.

    Drift: population stability index (10 bins; 0.1 moderate, 0.25 drift) and a two-sample KS
    test for query length, context count and every judgment's probabilities; a two-proportion
    z-test for the abstention rate.
    """
    try:
        check_output_paths(("--markdown", markdown))
        first, second = read_report(a), read_report(b)
        result = diff_reports(first, second)
        drift = distribution_drift(first, second)
        text = (
            diff_markdown(result, a.name, b.name)
            + "\n\n"
            + drift_markdown(drift, a.name, b.name, include_changes=False)
        )
        typer.echo(text)
        if markdown is not None:
            write_bytes(markdown, text.encode())
    except RagbatchError as error:
        raise fail(error) from None


def merge_command(
    partials: Annotated[list[Path], typer.Argument(help="Partial results of every shard.")],
    out: Annotated[Path, typer.Option(help="Where to write the merged report.")] = Path(
        "reports/report.json"
    ),
) -> None:
    """Merge shard partials into the report a single run would have written (same bytes)."""
    try:
        check_output_paths(("--out", out))
        info, outcomes = merge_partials(partials)
        write_bytes(out, report_bytes(summarize(outcomes, info)))
    except RagbatchError as error:
        raise fail(error) from None
    typer.echo(f"merged {len(partials)} partials, {len(outcomes)} rows: {out}")


# What a run's price depends on: its rows, the Jev model, the reply cache, the pricing, the claim
# mode and the request size limits (the other options change how a run goes, not its calls).
PRICED = ("provider", "model", "cache_dir", "pricing", "groundedness", "claim_evidence",
          "claim_extractor", "max_request_tokens", "max_state_question_tokens", "context_order",
          "probe", "probe_rate")  # fmt: skip


# an estimate prices the live service; the mock costs nothing
@with_options(*SOURCE, *PRICED, defaults={"provider": "jev"})
def estimate_command(
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    **options: Any,
) -> None:
    """Calls, input tokens and cost of a run before spending anything (no network).

    Takes run's options for the dataset and what the cost depends on. Lists the rows whose
    request is over a size limit: the run fails them (request-too-large) without sending them.
    """
    try:
        result = estimate_options(RunOptions.of(**options))
    except RagbatchError as error:
        raise fail(error) from None
    if json_out:
        typer.echo(result.model_dump_json(by_alias=True))
        return
    cost = "unavailable" if result.cost_usd is None else f"{result.currency} {result.cost_usd:.6f}"
    typer.echo(
        f"{result.rows} rows, {result.calls} calls ({result.cache_hits} in the cache), "
        f"~{result.input_tokens} input tokens to send, cost {cost} "
        f"(model {result.model}, pricing {result.pricing_version})"
    )
    if result.probe_calls:
        typer.echo(f"of which {result.probe_calls} judge-audit probe calls (--probe)")
    if result.accuracy is not None:
        a = result.accuracy
        typer.echo(
            f"estimator error on {a.compared_calls} cached calls: total "
            f"{a.total_relative_error:+.1%}, mean absolute {a.mean_absolute_relative_error:.1%}"
        )
    if result.too_large:
        typer.echo(
            f"{len(result.too_large)} call(s) over a request size limit, not sent (their rows "
            "fail as request-too-large):"
        )
        for item in result.too_large[:TOO_LARGE_SHOWN]:
            typer.echo(f"  row {item.row}: {item.message}")
        if len(result.too_large) > TOO_LARGE_SHOWN:
            typer.echo(f"  … and {len(result.too_large) - TOO_LARGE_SHOWN} more (see --json)")


@with_options(*SOURCE)
def counterfactual_command(
    out: Annotated[Path, typer.Option(help="Where to write the counterfactual JSONL.")],
    keep_mock: Annotated[
        bool, typer.Option("--keep-mock", help="Keep mock/baseline/claims (for testing only).")
    ] = False,
    **source: Any,
) -> None:
    """Write, per row with expected documents, a variant without them that should be refused.

    DATASET (read as for run) names the expected documents in golden.expectedDocuments.
    Each variant is linked to its row (golden.counterfactualOf) and expects abstention. Run
    your generator on it to get new answers, then `ragbatch run` it: the report shows the
    refusal rate and False Answer Rate on the counterfactual rows next to the originals.
    """
    try:
        check_output_paths(("--out", out))
        stats = write_counterfactuals(open_source(source), out, keep_mock=keep_mock)
    except RagbatchError as error:
        raise fail(error) from None
    typer.echo(
        f"wrote {stats.written} counterfactual rows to {out} ({stats.rows_in} read; skipped "
        f"{stats.skipped_no_expected} without expected documents, {stats.skipped_no_match} "
        "whose expected documents were not retrieved)"
    )


def calibrate_command(
    report: Annotated[Path, typer.Argument(help="A report with expected labels.")],
    target_risk: Annotated[
        list[float],
        typer.Option(
            help="Most diagnosis error allowed among automatic rows; repeat it for a table "
            "of what each target certifies (the policy is the first one's)."
        ),
    ] = [0.05],  # noqa: B006  # typer reads the default; it is never mutated
    confidence: Annotated[float, typer.Option(help="Confidence of the guarantee.")] = 0.95,
    routing: Annotated[
        str,
        typer.Option(
            help="Routing to search: 'auto' (both ladders, sharing the confidence), "
            "'showcase' or 'guarded'."
        ),
    ] = "auto",
    per_diagnosis: Annotated[
        str | None,
        typer.Option(
            help="Also bound each automatic diagnosis: 'all' (each at --target-risk) or "
            "e.g. 'PASS=0.05,RETRIEVAL_MISS=0.02'; certified jointly with the pooled target."
        ),
    ] = None,
    folds: Annotated[int, typer.Option(min=2, help="Cross-validation folds.")] = 5,
    seed: Annotated[int, typer.Option(help="Seed of the search split and the folds.")] = 0,
    out: Annotated[Path, typer.Option(help="Where to write the policy.")] = Path("policy.json"),
) -> None:
    """Fit thresholds that automate the most rows with a risk guarantee.

    Ladders of thresholds fixed in advance are tested in order on every labelled row
    (fixed-sequence testing); the policy guarantees that the diagnosis error among
    automatic rows is at most --target-risk with --confidence, for rows drawn i.i.d. like
    these. A multi-step trace with its own label counts as one row, re-diagnosed by the
    trace policy from its steps' answers. Refuses when the data cannot support the target,
    saying what they can support.
    """
    try:
        check_output_paths(("--out", out))
        data = read_report(report)
        policy, table = calibrate_targets(
            data, target_risk, confidence, folds, seed, routing, per_diagnosis
        )
        write_bytes(out, policy_bytes(policy))
    except RagbatchError as error:
        raise fail(error) from None
    typer.echo(summary(policy, str(out), table))
    warning = audit_warning(data.get("judgeAudit"), policy.judgments, "the calibrated policy")
    if warning is not None:
        typer.echo(f"warning: {warning}", err=True)


def agreement_command(
    report: Annotated[Path, typer.Argument(help="The judged report.")],
    labels: Annotated[Path, typer.Argument(help="The labelled sample (JSONL).")],
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Judge-human agreement overall and per judgment; warns below 80%."""
    try:
        lines = [orjson.loads(line) for line in labels.read_bytes().splitlines() if line.strip()]
        result = agreement(read_report(report)["rows"], lines, str(labels))
    except OSError as exc:
        raise fail(ConfigError(f"cannot read labels {labels}: {exc.strerror or exc}")) from None
    except orjson.JSONDecodeError as exc:
        raise fail(ConfigError(f"{labels}: not valid JSONL ({exc})")) from None
    except RagbatchError as error:
        raise fail(error) from None
    kappa = "n/a" if result.kappa is None else f"{result.kappa:.3f}"
    if json_out:
        typer.echo(result.model_dump_json(by_alias=True))
    else:
        first = result.first_failing_step
        typer.echo(
            f"agreement {result.agreement:.1%} on {result.decided} decided rows "
            f"(kappa {kappa}), {result.fallback} fallback rows"
            + (
                f"; first failing step {first.agreement:.1%} on {first.count} decided traces"
                if first is not None
                else ""
            )
        )
    if result.warning:
        typer.echo(f"warning: {result.warning}", err=True)
