"""Human-readable views of a report (pure: strings out, no I/O). Numbers are rounded here only."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ragbatch.core import Cost
from ragbatch.metrics import Latency
from ragbatch.report._audit_view import audit_line
from ragbatch.report._models import Mode, Report
from ragbatch.report._tables import guarantee_text
from ragbatch.report._trace_tables import trace_line

# What to do about each failure kind (docs/reference/report-format.md); http-4xx share one hint.
FAILURE_HINTS: dict[str, str] = {
    "mock-missing-answer": "these rows' mock blocks lack an answer Jev is asked; use --provider "
    "jev (the live Jev API, through the cache) or complete the blocks",
    "cache-miss": "these requests are not in the cache and --offline is set; run once without "
    "--offline to record them, or pass the --model the cache was recorded with",
    "timeout": "attempts ran out of --timeout; raise it or lower --concurrency, then rerun "
    "(finished replies are in the cache)",
    "deadline-exceeded": "rows ran out of --row-deadline across retries; raise it, then rerun",
    "connection": "the service could not be reached; check --base-url, the proxy the messages "
    "name (HTTPS_PROXY, HTTP_PROXY, ALL_PROXY, NO_PROXY) and the network, then rerun (finished "
    "replies are in the cache)",
    "invalid-http-response": "the server's replies break HTTP (not retried: it would send them "
    "again); check --base-url, or report it to whoever runs the server",
    "server-error": "the service kept failing (5xx) after --max-retries; rerun later to resume "
    "from the cache",
    "rate-limited": "the service kept throttling (429) after --max-retries; lower --concurrency "
    "or set --max-rps",
    "malformed-response": "the replies did not answer the questions asked; rerun, and report it "
    "if it persists",
    "no-baseline": "these rows record no baseline verdict; use --baseline lexical (offline) or "
    "--baseline llm",
}
HTTP_HINT = "the service refused the request (the HTTP status is in the kind); see the message"
OTHER_HINT = "see rows[].error in the report"


def failure_hint(kind: str) -> str:
    """What to do about failed rows of ``kind``."""
    return FAILURE_HINTS.get(kind, HTTP_HINT if kind.startswith("http-") else OTHER_HINT)


def failures_lines(
    failures: Mapping[str, Any], requested_model: str, recorded_models: list[str] | None = None
) -> list[str]:
    """Failed rows by kind (the run record's ``failuresByKind``), Jev's then the baseline's:
    count, the first row and its message, and what to do."""
    lines: list[str] = []
    for side, title in (("jev", "Jev"), ("baseline", "baseline")):
        kinds: Mapping[str, Any] = failures.get(side) or {}
        if kinds:
            lines.append(f"  {title} failures by kind:")
        for kind, entry in kinds.items():
            lines.append(
                f"    {kind}: {entry['rows']} rows; first {entry['firstId']}: "
                f"{entry['firstMessage']}"
            )
            hint = failure_hint(kind)
            others = [m for m in recorded_models or () if m != requested_model]
            if kind == "cache-miss" and others and requested_model not in (recorded_models or ()):
                models = ", ".join(others)
                hint = (
                    f"the cache holds replies recorded for {models}, not for {requested_model}: "
                    f"pass --model {others[0]} to replay them, or run without --offline to "
                    "record these"
                )
            lines.append(f"      what to do: {hint}")
    return lines


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _ms(latency: Latency) -> str:
    if latency.p50_ms is None or latency.p95_ms is None:
        return "n/a"
    return f"p50 {latency.p50_ms:.0f} ms, p95 {latency.p95_ms:.0f} ms"


def _usd(cost: Cost) -> str:
    if not cost.available or cost.usd is None:
        return f"unavailable ({cost.reason})"
    return f"{cost.currency} {cost.usd:.6f}"


def _scores(mode: Mode) -> str:
    """Accuracy, ECE and AURC over the labelled rows the mode judged; with none, which is the
    case (an accuracy of 0/0 would read as a failed run)."""
    c = mode.classification
    if c.rows == 0:
        return "no labelled rows to score"
    if c.successful == 0:
        return f"none of the {c.rows} labelled rows judged"
    return (
        f"accuracy {_pct(c.accuracy)} ({c.correct}/{c.successful}), "
        f"ECE {mode.calibration.ece:.3f}, AURC {mode.selective.aurc:.3f}"
    )


def _mode_line(name: str, mode: Mode) -> str:
    return (
        f"  {name:<10} {_scores(mode)}, failures {mode.failures.count}, "
        f"latency {_ms(mode.latency)}, "
        f"tokens {mode.usage.input_tokens} in / {mode.usage.output_tokens} out, "
        f"cost {_usd(mode.cost)}"
    )


def no_fallback_lines(report: Report) -> list[str]:
    """Plain words for a run whose fallback judge never gave a verdict (e.g. an import with no
    recorded baseline): the cascade figures then hold Jev's own decisions only."""
    cascade, baseline = report.modes.cascade, report.modes.baseline
    if cascade.fallback_rate == 0 or baseline.failures.count < baseline.rows:
        return []
    kinds = ", ".join(f"{kind} {n}" for kind, n in sorted(baseline.failures.by_kind.items()))
    return [
        f"  no fallback judge was available: every baseline call failed ({kinds}), so no "
        "row was judged by the fallback;",
        "    the cascade's accuracy covers only the rows Jev decided, and the rows it routed "
        "to the fallback count as cascade failures",
    ]


def summary_text(report: Report, record: Mapping[str, Any] | None = None) -> str:
    """A short summary for the terminal: per-mode accuracy, fallback, failures, latency, cost;
    with the run ``record``, failed rows by kind with the first message and what to do."""
    modes = report.modes
    cascade = modes.cascade
    lines = [
        f"ragbatch: {report.dataset.rows} rows of {report.dataset.name} "
        f"({report.dataset.labelled_rows} labelled), decision variant {report.decisions.variant}, "
        f"provider {report.provider.name}, pricing {report.pricing.version}",
        _mode_line("jev-only", modes.jev_only),
        _mode_line("baseline", modes.baseline),
        _mode_line("cascade", cascade),
        f"  fallback rate {_pct(cascade.fallback_rate)} "
        f"({cascade.end_to_end.baseline_calls} rows sent to the baseline), "
        f"resolved by Jev {_pct(cascade.primary_resolved_rate)}, "
        f"Jev failures {_pct(cascade.primary_failure_rate)}",
        *no_fallback_lines(report),
    ]
    if record is not None and record.get("failuresByKind"):
        cache = record.get("cache") or {}
        lines += failures_lines(
            record["failuresByKind"], report.provider.requested_model, cache.get("recordedModels")
        )
    answer = guarantee_text(report)
    if answer is not None:
        lines.append(f"  guarantee: {answer}")
    traces = trace_line(report.traces)
    if traces is not None:
        lines.append(traces)
    ranking = report.retrieval_ranking
    if ranking is not None:
        top = max(ranking.at, key=int)
        at = ranking.at[top]
        lines.append(
            f"  retrieval ({ranking.rows} labelled rows): MRR {ranking.mrr:.3f}, "
            f"Recall@{top} {at.recall:.3f}, NDCG@{top} {at.ndcg:.3f}, Hit@{top} {at.hit:.3f}"
        )
    abstention = modes.jev_only.abstention
    if abstention is not None:
        lines.append(
            f"  abstention: accuracy {_pct(abstention.accuracy)}, false answer rate "
            f"{_pct(abstention.false_answer_rate)} (the dangerous one), false abstention rate "
            f"{_pct(abstention.false_abstention_rate)}"
        )
    if report.slices is not None:
        flagged = [s for s in report.slices.slices if s.flag]
        for s in flagged[:5]:
            lines.append(f"  slice flagged: {s.dimension}={s.value} ({s.rows} rows): {s.reason}")
    claims = modes.jev_only.claims
    if claims is not None:
        lines.append(
            f"  claims ({claims.scope} evidence): {claims.total_claims} claims, per-claim accuracy "
            f"{_pct(claims.classification.accuracy)} vs citation check "
            f"{_pct(claims.citation_check.classification.accuracy)}, answer-level accuracy "
            f"{_pct(claims.answer_level_accuracy)}, {claims.missing_citations} missing citations, "
            f"no-fit {_pct(claims.no_fit_rate)}, {claims.rows_failed_by_veto} answers vetoed"
        )
    audit = audit_line(report.judge_audit)
    if audit is not None:
        lines.append(audit)
    return "\n".join(lines)


def run_text(record: dict[str, Any]) -> str:
    """This run's wall-clock facts: throughput, cache hits, retries (not in the report)."""
    parts = [f"  run: {record['rowsPerSecond']:.1f} rows/s over {record['wallSeconds']:.2f} s"]
    cache = record.get("cache")
    if cache:
        saved = cache["savedUsd"]
        parts.append(
            f"cache {cache['hits']} hits / {cache['misses']} misses"
            + (f" (saved USD {saved:.6f})" if saved else "")
            + (f", {cache['corrupt']} corrupt entries refetched" if cache["corrupt"] else "")
        )
    retries = record.get("retriesByStatus")
    if retries:
        parts.append("retries " + ", ".join(f"{k}: {v}" for k, v in retries.items()))
    return ", ".join(parts)
