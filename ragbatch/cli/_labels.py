"""CLI commands around human labels: audit-sample, infer, and the gate (file I/O only).

``audit-sample`` draws the sample people label; ``infer`` turns the filled-in sample and the
report's judge verdicts into corrected rates with intervals (:mod:`ragbatch.compare._inference`);
``gate`` compares two reports by the rules, and with ``--labels`` also by corrected rates,
answering PASS, FAIL or UNDECIDED (:mod:`ragbatch.compare._inference_gate`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from statistics import NormalDist
from typing import Annotated, Any

import orjson
import typer

from ragbatch._files import write_bytes
from ragbatch.calibrate import (
    audit_sample,
    instructions_line,
    jsonl_bytes,
    row_texts,
    sample_header,
    trace_texts,
)
from ragbatch.cli._common import check_output_paths, fail, read_json, read_report
from ragbatch.cli._run_command import SOURCE, source_options, with_options
from ragbatch.compare import (
    DEFAULT_MAX_RISE,
    JEV_ONLY,
    AuditGate,
    CorrectedGate,
    RulePathError,
    audit_gate,
    audit_gate_markdown,
    corrected_gate,
    corrected_markdown,
    gate,
    gate_junit,
    gate_markdown,
    infer,
    judge_failure_rates,
    parse_rules,
)
from ragbatch.core import JUDGMENTS, ConfigError, RagbatchError, Trace
from ragbatch.data import read_labels
from ragbatch.metrics import Inference, labels_needed
from ragbatch.report import Report, audit_warning, report_bytes, report_html, report_markdown
from ragbatch.run import open_source_items

Labels = Annotated[Path, typer.Option(help="The labelled audit sample (JSONL).")]
Confidence = Annotated[
    float, typer.Option(min=0.5, max=0.999, help="Confidence level of every interval.")
]


def dataset_texts(source: Mapping[str, Any], report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Question, contexts and answer per row id of the dataset ``report`` was run on (the
    :data:`~ragbatch.cli._run_command.SOURCE` options name it); a multi-step trace's steps."""
    reader = open_source_items(source_options(source))
    texts = {
        item.id: trace_texts(item)
        if isinstance(item, Trace)
        else row_texts(
            item.question, [c.model_dump(exclude_none=True) for c in item.contexts], item.answer
        )
        for item in reader.items()
    }
    expected = (report.get("dataset") or {}).get("sha256")
    if expected and reader.sha256 != expected:
        raise ConfigError(
            f"{source['dataset']} is not the dataset the report was run on (its sha256 differs from the "
            "report's dataset.sha256); pass that dataset with --dataset"
        )
    return texts


def infer_report(
    report_path: Path, labels: Path, confidence: float, target_width: float | None
) -> tuple[Report, Inference]:
    """The typed report and its inference from ``labels`` (ConfigError on a mismatch)."""
    report = Report.model_validate(read_report(report_path))
    return report, infer(report, read_labels(labels), confidence, target_width, str(labels))


def _line(e: Any) -> str:
    where = "" if e.slice is None else f" [{e.slice['dimension']}={e.slice['value']}]"
    only = e.labels_only
    return (
        f"{e.target + where:<44} {e.mode:<8} judge {e.judge_rate:6.1%}  corrected "
        f"{e.estimate:6.1%} [{e.low:6.1%}, {e.high:6.1%}]  labels only [{only.low:6.1%}, "
        f"{only.high:6.1%}]  {e.labels} labels ~ {e.effective_labels:.0f}"
    )


# --dataset: check that the labels belong to the report of this dataset (when given)
@with_options(*SOURCE, defaults={"dataset": None}, as_options={"dataset"})
def infer_command(
    report: Annotated[Path, typer.Argument(help="The judged report.")],
    labels: Labels,
    confidence: Confidence = 0.95,
    target_width: Annotated[
        float | None,
        typer.Option(help="Half-width to plan for: how many more labels would reach it."),
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    out: Annotated[
        Path | None, typer.Option(help="Write the report with its `inference` section here.")
    ] = None,
    markdown: Annotated[Path | None, typer.Option(help="Write the Markdown view here.")] = None,
    html: Annotated[Path | None, typer.Option(help="Write the HTML view here.")] = None,
    **source: Any,
) -> None:
    """Corrected failure rates with valid intervals from a few human labels (PPI++).

    For each diagnosis and any failure (Jev-only and cascade), each judgment's positive rate
    and each --slice-by slice: the judge's raw rate, the corrected estimate and its interval,
    the labels-only interval and the effective number of labels. A sample that does not match
    the report (another dataset, unknown ids) is exit 2; with --dataset (and its --format),
    the dataset must be the one the report was run on.
    """
    try:
        check_output_paths(("--out", out), ("--markdown", markdown), ("--html", html))
        typed, result = infer_report(report, labels, confidence, target_width)
        if source["dataset"] is not None:
            dataset_texts(source, read_report(report))
        with_inference = typed.model_copy(update={"inference": result})
        if out is not None:
            write_bytes(out, report_bytes(with_inference))
        if markdown is not None:
            write_bytes(markdown, report_markdown(with_inference).encode())
        if html is not None:
            write_bytes(html, report_html(with_inference).encode())
    except RagbatchError as error:
        raise fail(error) from None
    audit = typed.judge_audit
    section = audit.model_dump(mode="json", by_alias=True) if audit is not None else None
    # every diagnosis rate reads every judgment, so the corrected rates rely on them all
    warning = audit_warning(section, JUDGMENTS, "infer (its corrected rates)")
    if warning is not None:
        typer.echo(f"warning: {warning}", err=True)
    if json_out:
        typer.echo(orjson.dumps(result.model_dump(mode="json", by_alias=True)).decode())
        return
    typer.echo(
        f"{result.labelled_rows} labelled rows ({result.sample} sample), "
        f"{confidence:.0%} intervals ({result.method.split(':')[0]})"
    )
    for e in result.estimates:
        typer.echo(_line(e))
    if result.more_labels is not None:
        typer.echo(
            f"label about {result.more_labels} more rows for ±{target_width:g} on every figure"
        )


# --dataset: the dataset the report was run on (its rows' question, contexts and answer)
@with_options(*SOURCE, as_options={"dataset"})
def audit_sample_command(
    report: Annotated[Path, typer.Argument(help="The report to sample from.")],
    rate: Annotated[float, typer.Option(min=0.0, max=1.0, help="Share of rows to sample.")] = 0.1,
    seed: Annotated[int, typer.Option(help="Seed of the sample.")] = 0,
    out: Annotated[Path, typer.Option(help="JSONL for people to label.")] = Path("sample.jsonl"),
    plan: Annotated[
        bool,
        typer.Option("--plan", help="Write nothing: say how many labels reach --target-width."),
    ] = False,
    target_width: Annotated[float, typer.Option(help="Half-width the plan aims at.")] = 0.02,
    labels: Annotated[
        Path | None, typer.Option(help="With --plan: labels so far, to plan from their variance.")
    ] = None,
    confidence: Confidence = 0.95,
    **source: Any,
) -> None:
    """A sample stratified by diagnosis and route, for people to label (about 10%).

    The first line says how to label and how the sample was drawn; each other line carries the
    row's question, contexts and answer next to the judge's verdict, its stratum and inclusion
    probability, with empty ``human`` fields to fill in; --dataset (read as for run) is the
    dataset the report was run on. --plan prints the labels needed.
    """
    try:
        if plan:
            typer.echo(plan_text(report, labels, target_width, confidence))
            return
        check_output_paths(("--out", out))
        data = read_report(report)
        lines = audit_sample(data["rows"], rate, seed, dataset_texts(source, data))
        header = sample_header(data["dataset"]["sha256"], rate, seed, lines)
        traces = any("steps" in line for line in lines)
        write_bytes(out, jsonl_bytes([instructions_line(header, traces), *lines]))
    except RagbatchError as error:
        raise fail(error) from None
    typer.echo(f"wrote {len(lines)} rows to label to {out} (instructions on its first line)")


def plan_text(report: Path, labels: Path | None, width: float, confidence: float) -> str:
    """Labels needed for ±``width``: from the labels' variance when given, else the labels-
    only worst case of the judge's any-failure rate (the corrected interval is narrower)."""
    if not 0.0 < width < 1.0:
        raise ConfigError(f"--target-width must lie in (0, 1), got {width}")
    if labels is not None:
        _, result = infer_report(report, labels, confidence, width)
        return (
            f"label about {result.more_labels} more rows (now {result.labelled_rows}) for "
            f"±{width:g} at {confidence:.0%} on every figure, from the variance seen"
        )
    typed = Report.model_validate(read_report(report))
    rows = sum(r.status == "ok" for r in typed.rows)
    p = judge_failure_rates(typed)[JEV_ONLY]
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    need = labels_needed(1, max(2, rows), max(p * (1 - p), 0.01) * (1 - 1 / max(2, rows)), width, z)
    share = need / max(1, rows)
    return (
        f"label about {need} rows ({share:.1%} of {rows}: --rate {share:.3g}) for ±{width:g} at "
        f"{confidence:.0%} on the any-failure rate (judge says {p:.1%}); a good judge needs "
        "fewer: label a first sample, then plan again with --labels"
    )


def gate_command(
    current: Annotated[Path, typer.Argument(help="Report of the change under test.")],
    baseline: Annotated[Path, typer.Option(help="Report of the baseline (e.g. main).")],
    rules: Annotated[
        Path | None,
        typer.Option(help="JSON list of extra rules: {path, maxDrop, direction}."),
    ] = None,
    no_default_rules: Annotated[
        bool, typer.Option("--no-default-rules", help="Use only the rules file.")
    ] = False,
    alpha: Annotated[float, typer.Option(help="Significance level of the paired test.")] = 0.05,
    markdown: Annotated[
        Path | None, typer.Option(help="Also write the Markdown summary here.")
    ] = None,
    junit: Annotated[Path | None, typer.Option(help="Also write JUnit XML here.")] = None,
    labels: Annotated[
        Path | None,
        typer.Option(help="Human labels of CURRENT's audit sample: gate on corrected rates."),
    ] = None,
    baseline_labels: Annotated[
        Path | None, typer.Option(help="Human labels of the baseline's audit sample.")
    ] = None,
    max_rise: Annotated[
        float, typer.Option(help="With --labels: largest allowed rise of a corrected rate.")
    ] = DEFAULT_MAX_RISE,
    confidence: Confidence = 0.95,
    max_flip_rate: Annotated[
        float | None,
        typer.Option(
            min=0.0,
            max=1.0,
            help="Fail when a judge-audit probe's flip interval lies wholly above this rate.",
        ),
    ] = None,
) -> None:
    """Fail (exit 1) when CURRENT regressed against --baseline beyond the rules.

    Default rules: diagnosis accuracy of Jev-only and of the cascade drop > 0.02, fallback
    rate rise > 0.05, failure rate rise > 0.02, Recall@10 drop > 0.02,
    groundedness accuracy drop > 0.02, claim answer-level accuracy (citation quality) drop >
    0.05. A drop only counts when an exact paired test on per-row outcomes (McNemar / sign
    test) says it is not noise. A rules-file path in neither report is a usage error.
    With --labels, the corrected any-failure rates (see ragbatch infer) must not rise by more
    than --max-rise: PASS, FAIL, or UNDECIDED with the labels still needed.
    With --max-flip-rate, CURRENT's judgeAudit entries (ragbatch run --probe, ragbatch probe)
    fail when their flip rate's whole 95% interval lies above it, and are named.
    Exit 0 pass, 1 regression, 2 usage error, 6 undecided.
    """
    corrected: CorrectedGate | None = None
    audit: AuditGate | None = None
    try:
        check_output_paths(("--markdown", markdown), ("--junit", junit))
        if baseline_labels is not None and labels is None:
            raise ConfigError("--baseline-labels needs --labels (the current report's labels)")
        extra = parse_rules(read_json(rules, "rules file")) if rules else []
        reports = read_report(current), read_report(baseline)
        try:
            result = gate(*reports, extra, defaults=not no_default_rules, alpha=alpha)
        except RulePathError as error:  # a rule path in neither report: name the rules file
            raise ConfigError(f"{rules}: {error}") from None
        text = gate_markdown(result)
        if max_flip_rate is not None:
            audit = audit_gate(reports[0], max_flip_rate)
            text += "\n" + audit_gate_markdown(audit)
        if labels is not None:
            corrected = _corrected(current, baseline, labels, baseline_labels, max_rise, confidence)
            text += "\n" + corrected_markdown(corrected)
        typer.echo(text)
        if markdown is not None:
            write_bytes(markdown, text.encode())
        if junit is not None:
            write_bytes(junit, gate_junit(result, corrected, audit).encode())
    except RagbatchError as error:
        raise fail(error) from None
    code = result.exit_code or (audit.exit_code if audit is not None else 0)
    raise typer.Exit(code if code or corrected is None else corrected.exit_code)


def _corrected(
    current: Path,
    baseline: Path,
    labels: Path,
    baseline_labels: Path | None,
    max_rise: float,
    confidence: float,
) -> CorrectedGate:
    _, now = infer_report(current, labels, confidence, None)
    base_report = Report.model_validate(read_report(baseline))
    before = (
        infer_report(baseline, baseline_labels, confidence, None)[1]
        if baseline_labels is not None
        else base_report.inference
    )
    return corrected_gate(now, before, judge_failure_rates(base_report), max_rise)
