"""One evaluation job end to end: files in, report bytes out (does I/O; no CLI concerns).

Reads the pricing snapshot, streams the dataset through :func:`ragbatch.run.runner.run_stream`
into a :class:`~ragbatch.report.builder.ReportBuilder` (outcomes are not kept), and writes the
report and the optional run record. The CLI and the Python API both call :func:`run_job`.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import anyio
import orjson

from ragbatch.core.claims import ClaimExtractor
from ragbatch.core.errors import BUDGET_KIND, ConfigError, RagbatchError
from ragbatch.core.outcome import RowOutcome
from ragbatch.core.pricing import PricingSnapshot, total_cost
from ragbatch.core.provider import Provider
from ragbatch.data.formats import open_dataset
from ragbatch.providers.cache import CachedProvider, ReplyCache, recorded_models
from ragbatch.providers.jev import (
    JevProvider,
)
from ragbatch.report.builder import ROWS_IN_FILE, ROWS_NOT_KEPT, ReportBuilder, RunInfo
from ragbatch.report.models import report_bytes
from ragbatch.report.rows_out import RowsWriter
from ragbatch.run.budget import BudgetedProvider
from ragbatch.run.config import (
    DEFAULT_CACHE,
    DEFAULT_DATASET,
    DEFAULT_OUT,
    DEFAULT_PRICING,
    PRICING_NAME,
    JobConfig,
    JobResult,
    RowSource,
    check_outputs,
    write_bytes,
)
from ragbatch.run.factory import (
    load_pricing,
    load_thresholds,
    make_baseline,
    make_claims,
    make_provider,
)
from ragbatch.run.preflight import check_slice_fields, option_warnings
from ragbatch.run.progress import Progress, Snapshot, count_lines
from ragbatch.run.runner import RunConfig, run_stream
from ragbatch.run.shards import count_shard_rows, part_rows, shard_pairs, write_shard
from ragbatch.run.stop import StopWatch

__all__ = [
    "DEFAULT_CACHE",
    "DEFAULT_DATASET",
    "DEFAULT_OUT",
    "DEFAULT_PRICING",
    "PRICING_NAME",
    "JobConfig",
    "JobResult",
    "RowSource",
    "check_outputs",
    "evaluate_async",
    "load_pricing",
    "load_thresholds",
    "make_baseline",
    "make_claims",
    "make_provider",
    "run_job",
    "write_bytes",
]


def _unwrap(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The first real error inside (possibly nested) task-group exception groups."""
    first: BaseException = group
    while isinstance(first, BaseExceptionGroup):
        first = first.exceptions[0]
    return first


def watch(
    config: JobConfig, pricing: PricingSnapshot, cached: CachedProvider | None, total: int | None
) -> tuple[Progress | None, RowsWriter | None]:
    """The observers of finished rows: the progress display (rows as they finish) and the
    --rows-out writer (rows in input order)."""
    progress = None
    if config.progress != "none":
        live = Snapshot()
        if cached is not None:
            stats = cached.stats
            live.cache_hits = lambda: stats.hits
            live.cache_lookups = lambda: stats.hits + stats.misses
            inner = (
                cached.inner.inner if isinstance(cached.inner, BudgetedProvider) else cached.inner
            )
            if isinstance(inner, JevProvider):
                limiter, counts = inner.limiter, inner.retries
                live.in_flight = lambda: limiter.stats.in_flight
                live.concurrency = lambda: limiter.limit
                live.retries = lambda: sum(counts.values())
                live.throttled = lambda: limiter.stats.throttled
                live.hold = limiter.hold
        shard = config.shard
        progress = Progress(
            total,
            pricing,
            live,
            label=f"shard {shard[0]}/{shard[1]}" if shard else "",
            mode=config.progress,
            interval=config.progress_interval,
        )
    rows_out = RowsWriter(config.rows_out) if config.rows_out is not None else None
    return progress, rows_out


def _ignore(message: str) -> None:
    return None


async def evaluate_async(
    config: JobConfig, warn: Callable[[str], None] = _ignore, stop: StopWatch | None = None
) -> JobResult:
    """Run the job inside an existing event loop; ``warn`` hears warnings as they arise.

    With ``stop`` (the CLI's and the workers'), a signal or a lost parent ends the run early:
    nothing more is sent, the cache is closed, nothing is written and :class:`Interrupted` is
    raised (exit 130 for SIGINT, 143 for SIGTERM).
    """
    if config.concurrency < 1:
        raise ConfigError(f"--concurrency must be at least 1, got {config.concurrency}")
    if config.shard is not None and config.partial_out is None:
        raise ConfigError("--shard needs --partial-out PATH (merge partials with ragbatch merge)")
    check_outputs(config)
    pricing = load_pricing(config.pricing)
    thresholds, policy = load_thresholds(config)
    config = replace(config, thresholds=thresholds)
    claims = make_claims(config)
    check_slice_fields(config)  # before the first row (stops reading once every field is seen)
    for warning in option_warnings(config):
        warn(warning)
    baseline = make_baseline(config)
    reader = config.source or open_dataset(
        config.dataset,
        config.format,
        mapping=config.mapping,
        outputs=config.outputs,
        ignore_unknown_fields=config.ignore_unknown_fields,
    )
    # the progress total: a file's non-blank lines (a trace export has several lines a row)
    by_lines = config.source is None and config.format not in ("openinference", "langfuse")
    total = count_lines(str(config.dataset)) if by_lines else None
    if config.shard is not None:  # progress counts against the shard's own rows
        jsonl = config.format == "jsonl" and config.source is None and config.progress != "none"
        total = count_shard_rows(config.dataset, config.shard) if jsonl else part_rows(reader)
    limit = config.max_report_rows
    # a JSONL file's non-blank lines are its rows (any other line fails the run)
    known_rows = total if config.format == "jsonl" and config.shard is None else None
    if known_rows is not None and limit is not None and known_rows > limit and not config.rows_out:
        warn(
            f"{total} rows > --max-report-rows {limit}: the report will keep aggregates only; "
            "add --rows-out PATH to keep per-row results"
        )
    provider, cached, warnings = make_provider(config, pricing)  # last: it holds connections
    for warning in warnings:
        warn(warning)
    info = RunInfo(
        dataset_name=reader.name,
        dataset_sha256="",  # known once the whole file is read
        provider=provider.name,
        requested_model=provider.model,
        baseline=baseline.name,
        thresholds=config.thresholds,
        pricing=pricing,
        claims=(claims.extractor.name, claims.scope) if claims else None,
        ks=config.ks,
        slice_by=config.slice_by,
        policy_version=policy.version if policy else None,
        guarantee=policy.guarantee if policy else None,
        max_report_rows=config.max_report_rows,
        rows_out=config.rows_out is not None,
    )
    builder = ReportBuilder(info, known_rows)
    calls = CallLog(config.max_report_rows, known_rows, rows_out=config.rows_out is not None)
    kept: list[RowOutcome] = []  # a shard's outcomes, for its partial file
    started = time.perf_counter()
    stopped = False
    try:
        run_config = RunConfig(
            config.concurrency,
            config.thresholds,
            max_error_rate=config.max_error_rate,
            error_budget_rows=config.error_budget_rows,
            claims=claims,
        )
        pairs = shard_pairs(reader, config.shard)
        progress, rows_out = watch(config, pricing, cached, total)

        def in_order(outcome: RowOutcome) -> None:
            result = builder.add(outcome, want_row=rows_out is not None)
            calls.add(outcome)
            if rows_out is not None and result is not None:
                rows_out.write(result, outcome.row.question)
            if config.shard is not None and part_rows(reader) is None:  # a part keeps none
                kept.append(outcome)

        async def stream() -> None:
            await run_stream(
                pairs,
                provider,
                baseline,
                run_config,
                in_order,
                progress.on_row if progress is not None else None,
            )

        async def evaluate() -> None:
            if progress is None:
                await stream()
                return
            async with anyio.create_task_group() as tg:
                tg.start_soon(progress.tick)  # lines go on while no row finishes (a long hold)
                await stream()
                tg.cancel_scope.cancel()

        try:
            if stop is not None:
                stopped = await stop.run(evaluate)
            else:
                await evaluate()
        finally:
            if progress is not None:
                progress.close()
            if rows_out is not None:
                if stopped:  # cut short: no rows file under its name (a rerun writes it whole)
                    rows_out.discard()
                else:
                    rows_out.close()
    except BaseExceptionGroup as group:
        error = _unwrap(group)
        if isinstance(error, RagbatchError):
            raise error from None
        raise
    finally:
        await provider.aclose()
        await baseline.aclose()
        if claims is not None and not isinstance(claims.extractor, ClaimExtractor):
            await claims.extractor.aclose()
    if stop is not None and stopped:
        raise stop.interrupted(builder.rows, str(config.cache_dir) if cached else None)
    wall = time.perf_counter() - started
    report = builder.report(dataset_sha256=reader.sha256)
    data = report_bytes(report)
    if config.shard is not None and config.partial_out is not None:
        write_shard(config.partial_out, config.shard, reader, info, kept, builder, calls)
    elif config.out is not None:
        write_bytes(config.out, data)
    rate = builder.rows / wall if wall > 0 else 0.0
    record = calls.record(wall, rate, provider, cached, pricing)
    if cached is not None:
        for warning in cached.warnings:
            warn(warning)
        other = offline_models(cached)
        if other:
            record["cache"]["recordedModels"] = other
            warn(
                f"--offline: every lookup missed the cache ({cached.stats.misses} misses); it "
                f"holds replies recorded for {', '.join(other)}, not for {cached.model}: pass "
                f"--model {other[0]} to replay them"
            )
    if config.run_record is not None:
        write_bytes(config.run_record, orjson.dumps(record, option=orjson.OPT_INDENT_2) + b"\n")
    return JobResult(report, data, wall, rate, record)


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
        provider: Provider,
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
            inner = cached.inner
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


def run_job(
    config: JobConfig, warn: Callable[[str], None] = _ignore, stop: StopWatch | None = None
) -> JobResult:
    """Run the job in a fresh event loop (the CLI's entry)."""
    return anyio.run(evaluate_async, config, warn, stop)
