"""What the run record says about a run's calls (cache hits, retries, rate control, failures).

:class:`CallLog` hears every outcome in input order and keeps per-row call facts while the run
has at most ``--max-report-rows`` rows; :meth:`CallLog.record` adds the cache's and the live
client's counters at the end. Nothing here feeds the report.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from ragbatch.core import BUDGET_KIND, PricingSnapshot, RowOutcome, innermost, total_cost
from ragbatch.providers import JevProvider
from ragbatch.providers.cache import CachedProvider, ReplyCache, recorded_models
from ragbatch.report import ROWS_IN_FILE, ROWS_NOT_KEPT


def offline_models(cached: CachedProvider) -> list[str]:
    """After an offline run in which every lookup missed: the models the cache's replies were
    recorded for, when the requested one is not among them (else [])."""
    stats = cached.stats
    if cached.mode != "offline" or cached.cache is None or stats.hits or not stats.misses:
        return []
    reader = ReplyCache(cached.cache.directory, read_only=True)  # the run's one is closed
    try:
        models = recorded_models(reader)
    finally:
        reader.close()
    return models if models and cached.model not in models else []


class FailureLog:
    """Failed rows by kind, Jev's and the baseline's, each with its first row id and message
    (for the terminal summary; the report keeps the counts, the run record these too)."""

    def __init__(self) -> None:
        self.jev: dict[str, dict[str, Any]] = {}
        self.baseline: dict[str, dict[str, Any]] = {}

    def add(self, o: RowOutcome) -> None:
        if o.jev.failure is not None and o.jev.failure.kind == BUDGET_KIND:
            return  # not evaluated (--max-cost): reported as incomplete, not as a failure
        for kinds, failure in ((self.jev, o.jev.failure), (self.baseline, o.baseline.failure)):
            if failure is not None:
                first = {"rows": 0, "firstId": o.row.id, "firstMessage": failure.message}
                kinds.setdefault(failure.kind, first)["rows"] += 1

    def record(self) -> dict[str, Any]:
        """``{"jev": {kind: {rows, firstId, firstMessage}}, "baseline": {...}}``, kinds sorted."""
        return {
            "jev": dict(sorted(self.jev.items())),
            "baseline": dict(sorted(self.baseline.items())),
        }


def failures_of(outcomes: list[RowOutcome]) -> dict[str, Any]:
    """:meth:`FailureLog.record` of finished outcomes (a merge of shards)."""
    log = FailureLog()
    for outcome in outcomes:
        log.add(outcome)
    return log.record()


class CallLog:
    """Per-row call facts for the run record (cached? attempts, retries, latency, request id),
    kept while the run has at most ``limit`` rows; retry counts are always totalled."""

    def __init__(
        self, limit: int | None, expected_rows: int | None = None, rows_out: bool = False
    ) -> None:
        self.limit = limit
        self.rows_out = rows_out
        self.rows = 0
        self.retries: Counter[str] = Counter()
        self.failures = FailureLog()
        over = limit is not None and expected_rows is not None and expected_rows > limit
        self.calls: list[dict[str, Any]] | None = None if over else []

    def add(self, o: RowOutcome) -> None:
        self.rows += 1
        self.failures.add(o)
        reply, failure = o.jev.reply, o.jev.failure
        if reply is not None:
            self.retries.update(reply.retries)
        elif failure is not None:
            self.retries.update(failure.retries)
        if self.limit is not None and self.rows > self.limit:
            self.calls = None
        if self.calls is None:
            return
        entry: dict[str, Any] = {"id": o.row.id}
        if reply is not None:
            entry.update(
                cached=reply.cached,
                attempts=reply.attempts,
                retries=reply.retries,
                latencyMs=reply.latency_ms,
                wallMs=reply.wall_ms,
                model=reply.model,
                requestId=reply.request_id,
            )
        elif failure is not None:
            entry.update(
                failed=failure.kind,
                message=failure.message,
                retries=failure.retries,
                wallMs=o.jev.latency_ms,
            )
        self.calls.append(entry)

    def record(
        self,
        wall: float,
        rate: float,
        cached: CachedProvider | None,
        pricing: PricingSnapshot,
    ) -> dict[str, Any]:
        """What happened in this run (timings, retries, cache hits): kept out of the report."""
        record: dict[str, Any] = {
            "rows": self.rows,
            "wallSeconds": wall,
            "rowsPerSecond": rate,
            "retriesByStatus": dict(sorted(self.retries.items())),
            "failuresByKind": self.failures.record(),
        }
        if cached is not None:
            stats = cached.stats
            saved = total_cost(pricing, ((m, t, 0) for m, t in stats.saved_models.items()))
            record["cache"] = {
                "hits": stats.hits,
                "misses": stats.misses,
                "writes": stats.writes,
                "corrupt": stats.corrupt,
                "deduplicated": stats.deduplicated,
                "savedInputTokens": stats.saved_input_tokens,
                "savedUsd": saved.usd,
            }
            inner = innermost(cached)  # past the cost limit's wrapper, if any
            if isinstance(inner, JevProvider):
                limiter = inner.limiter.stats
                record["rateControl"] = {
                    "throttled": limiter.throttled,
                    "peakInFlight": limiter.peak_in_flight,
                    "lowestConcurrency": limiter.lowest_limit,
                    "finalConcurrency": limiter.current_limit,
                }
        if self.calls is None:
            record["callsOmitted"] = {
                "rows": self.rows,
                "limit": self.limit,
                "reason": ROWS_IN_FILE if self.rows_out else ROWS_NOT_KEPT,
            }
        else:
            record["calls"] = self.calls
        return record
