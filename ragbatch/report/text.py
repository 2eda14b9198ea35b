"""Human-readable views of a report (pure: strings out, no I/O). Numbers are rounded here only."""

from __future__ import annotations

from typing import Any

from ragbatch.core.pricing import Cost
from ragbatch.metrics.scores import Latency
from ragbatch.report.models import Mode, Report
from ragbatch.report.tables import guarantee_text


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


def _mode_line(name: str, mode: Mode) -> str:
    c = mode.classification
    return (
        f"  {name:<10} accuracy {_pct(c.accuracy)} ({c.correct}/{c.successful}), "
        f"failures {mode.failures.count}, ECE {mode.calibration.ece:.3f}, "
        f"AURC {mode.selective.aurc:.3f}, latency {_ms(mode.latency)}, "
        f"tokens {mode.usage.input_tokens} in / {mode.usage.output_tokens} out, "
        f"cost {_usd(mode.cost)}"
    )


def summary_text(report: Report) -> str:
    """A short summary for the terminal: per-mode accuracy, fallback, failures, latency, cost."""
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
    ]
    answer = guarantee_text(report)
    if answer is not None:
        lines.append(f"  guarantee: {answer}")
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
