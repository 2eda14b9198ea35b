"""Runs the parts of a run: parts -> :class:`Outcomes` (async I/O; writes only --rows-out lines).

Rows stream through :func:`ragbatch.run._runner.run_stream`; :class:`Collector` hears each
outcome in input order and feeds the report builder, the call log, the --rows-out file and
what the views and a shard's partial need. The progress display ticks beside the run, and a
:class:`~ragbatch.run._stop.RunCanceller` may cut it short (``Outcomes.stopped``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import anyio

from ragbatch.core import ConfigError, RagbatchError, RowOutcome, Trace, innermost
from ragbatch.metrics import MIN_PROBE_ROWS
from ragbatch.providers import JevProvider
from ragbatch.report import ReportBuilder, RowsWriter
from ragbatch.run._calls import CallLog
from ragbatch.run._factory import Parts
from ragbatch.run._probes import AuditSettings, ProbeCandidates, run_audit, sampled_rows
from ragbatch.run._progress import Progress, Snapshot
from ragbatch.run._runner import RunConfig, run_stream
from ragbatch.run._shards import row_pairs
from ragbatch.run._stop import RunCanceller


@dataclass
class Outcomes:
    """What a run kept: the report builder, the call log, and what the outputs need."""

    builder: ReportBuilder
    calls: CallLog
    kept: list[RowOutcome] = field(default_factory=list)  # a shard's, for its partial file
    texts: dict[str, tuple[str, str]] = field(default_factory=dict)  # (question, answer) by id
    traces: dict[str, Trace] = field(default_factory=dict)  # the HTML timelines' texts, by id
    wall_s: float = 0.0
    stopped: bool = False  # cut short by a signal or a lost parent
    # the source's hash as the rows read it, before the probe pass reads the sample again
    dataset_sha256: str | None = None


class Collector:
    """Hears every outcome in input order and hands it to whoever keeps something of it."""

    def __init__(self, parts: Parts, outcomes: Outcomes, rows_out: RowsWriter | None) -> None:
        self.outcomes = outcomes
        self.rows_out = rows_out
        self.keep_outcomes = parts.shard is not None and parts.shard.keeps_outcomes
        # the HTML view shows them: this run's, or its parent's (a planned part's)
        html = parts.options.output.html is not None
        self.keep_texts = html or (parts.shard is not None and parts.shard.keeps_texts)
        # the judge audit's candidates (--probe): every row, for the stratified sample
        self.candidates = ProbeCandidates() if parts.options.audit.probes else None

    def __call__(self, outcome: RowOutcome) -> None:
        kept = self.outcomes
        result = kept.builder.add(outcome, want_row=self.rows_out is not None)
        kept.calls.add(outcome)
        if self.rows_out is not None and result is not None:
            self.rows_out.write(result, outcome.row.question)
        if self.keep_outcomes:
            kept.kept.append(outcome)
        if self.keep_texts:
            kept.texts[outcome.row.id] = (outcome.row.question, outcome.row.answer)
            if outcome.jev.trace is not None:
                kept.traces[outcome.row.id] = outcome.jev.trace.trace
        if self.candidates is not None:
            self.candidates.add(outcome)


def live_snapshot(parts: Parts) -> Snapshot:
    """The counters the progress display reads: the cache's and the live client's."""
    live = Snapshot()
    if parts.cached is None:
        return live
    stats = parts.cached.stats
    live.cache_hits = lambda: stats.hits
    live.cache_lookups = lambda: stats.hits + stats.misses
    client = innermost(parts.cached)
    if isinstance(client, JevProvider):
        limiter, counts = client.limiter, client.retries
        live.in_flight = lambda: limiter.stats.in_flight
        live.concurrency = lambda: limiter.limit
        live.retries = lambda: sum(counts.values())
        live.throttled = lambda: limiter.stats.throttled
        live.hold = limiter.hold
    return live


def progress_of(parts: Parts) -> Progress | None:
    """The progress display on stderr (None with --quiet)."""
    o = parts.options
    if o.display.progress == "none":
        return None
    return Progress(
        parts.total,
        parts.pricing,
        live_snapshot(parts),
        label=parts.shard.label if parts.shard is not None else "",
        mode=o.display.progress,
        interval=o.display.progress_interval,
    )


def first_error(group: BaseExceptionGroup[BaseException]) -> RagbatchError | None:
    """The first RagbatchError anywhere in (nested) task-group exception groups.

    A worker's RunAborted (a rejected key, the error budget) ends the run; the producer
    may meanwhile fail on the closed stream, so the first leaf is not always the cause."""
    matched, _ = group.split(RagbatchError)
    leaf: BaseException | None = matched
    while isinstance(leaf, BaseExceptionGroup):
        leaf = leaf.exceptions[0]
    return leaf if isinstance(leaf, RagbatchError) else None


class Execution:
    """One run of the parts: the row stream, with the progress display ticking beside it."""

    def __init__(self, parts: Parts, rows_out: RowsWriter | None) -> None:
        o = parts.options
        if o.audit.probes and parts.shard is not None:
            raise ConfigError(  # a part's probes run in its parent, on the merged rows
                "--probe needs the whole run's rows, which a --shard has not: drop --shard, "
                "or probe the merged report with ragbatch probe REPORT --dataset DATA"
            )
        self.parts = parts
        self.outcomes = Outcomes(
            ReportBuilder(parts.info, parts.known_rows),
            CallLog(o.output.max_report_rows, parts.known_rows, rows_out=rows_out is not None),
        )
        self.collect = Collector(parts, self.outcomes, rows_out)
        self.progress = progress_of(parts)
        self.run_config = RunConfig(
            o.rate.concurrency,
            parts.thresholds,
            max_error_rate=o.limits.max_error_rate,
            error_budget_rows=o.limits.error_budget_rows,
            claims=parts.claims,
            context_order=o.audit.context_order,
        )

    async def stream(self) -> None:
        pairs = row_pairs(self.parts.reader, self.parts.shard)
        on_row = self.progress.on_row if self.progress is not None else None
        p = self.parts
        await run_stream(pairs, p.provider, p.baseline, self.run_config, self.collect, on_row)

    async def audit(self) -> None:
        """The judge audit's probe pass (--probe), after every row: docs/semantics.md §9."""
        candidates = self.collect.candidates
        if candidates is None:
            return
        p, audit = self.parts, self.parts.options.audit
        self.outcomes.dataset_sha256 = p.reader.sha256
        settings = AuditSettings(
            audit.probes, audit.probe_rate, MIN_PROBE_ROWS, audit.max_flip_rate,
            p.options.rate.concurrency,
        )  # fmt: skip
        rows = sampled_rows(p.reader, candidates, settings.rate, settings.min_rows)
        judge = await run_audit(p.provider, candidates, rows, settings, p.thresholds)
        self.outcomes.builder.judge_audit = judge

    async def body(self) -> None:
        if self.progress is None:
            await self.stream()
            await self.audit()
            return
        async with anyio.create_task_group() as tg:
            tg.start_soon(self.progress.tick)  # lines go on while no row finishes (a long hold)
            await self.stream()
            await self.audit()
            tg.cancel_scope.cancel()


async def execute(
    parts: Parts, rows_out: RowsWriter | None, canceller: RunCanceller | None
) -> Outcomes:
    """Evaluate every row of ``parts``; a RagbatchError inside the task groups comes out as
    itself (not as an exception group)."""
    run = Execution(parts, rows_out)
    started = time.perf_counter()
    try:
        if canceller is not None:
            run.outcomes.stopped = await canceller.run(run.body)
        else:
            await run.body()
    except BaseExceptionGroup as group:
        error = first_error(group)
        if error is None:
            raise
        raise error from None
    finally:
        if run.progress is not None:
            run.progress.close()
    run.outcomes.wall_s = time.perf_counter() - started
    return run.outcomes
