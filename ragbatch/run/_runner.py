"""Streams rows through concurrent provider calls: the task group of the rows (async I/O;
``run.execute`` runs the progress display beside it, ``run.stop`` a signal watcher).

Producer -> bounded memory object stream -> ``concurrency`` workers. Each worker asks Jev for
one row (one request, every question) or one trace (a request per judged step, one after
another: docs/semantics.md §8), applies the policy and asks the baseline judge; outcomes
are handed on in input order whatever order the calls finish in, through a bounded reordering
window, so memory does not grow with the row count. A call that fails is recorded as a failed
row and the run goes on; only :class:`~ragbatch.core._errors.RunAborted` (or a bug) stops it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TypeVar

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream

from ragbatch.core import (
    CLAIM_PREFIX,
    AsyncClaimExtractor,
    BaselineJudge,
    BaselineOutcome,
    Call,
    ChoiceAnswer,
    ClaimExtractor,
    ClaimResult,
    JevOutcome,
    JevRequest,
    Provider,
    ProviderError,
    Reply,
    Row,
    RowFailure,
    RowOutcome,
    RunAborted,
    Scope,
    StepJudgments,
    Thresholds,
    Trace,
    TraceJudged,
    build_request,
    claim_groups,
    claim_result,
    decision_for,
    diagnose,
    diagnose_trace,
    evidence_of,
    read_judgments,
    read_step_judgments,
    reversed_request,
    step_requests,
    summarize_claims,
    trace_decision,
    trace_view,
)
from ragbatch.providers.cache import deferred_writes

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class RunConfig:
    concurrency: int = 32
    thresholds: Thresholds = field(default_factory=Thresholds)
    # Stop the run when more than this share of rows failed (after ``error_budget_rows``).
    max_error_rate: float | None = None
    error_budget_rows: int = 20
    claims: ClaimConfig | None = None
    # --context-order: as-is, reversed, or both (two requests, P(true) averaged; §9)
    context_order: str = "as-is"


class ErrorBudget:
    """The error budget (``--max-error-rate``): aborts the run once the share of failed
    rows exceeds it (not the cost limit of ``--max-cost``, which is ``run.budget``)."""

    def __init__(self, config: RunConfig) -> None:
        self.config = config
        self.done = 0
        self.failed = 0

    def record(self, outcome: JevOutcome) -> None:
        self.done += 1
        if outcome.failure is None:
            return
        self.failed += 1
        max_rate = self.config.max_error_rate
        if max_rate is None or self.done < self.config.error_budget_rows:
            return
        if self.failed / self.done > max_rate:
            raise RunAborted(
                f"{self.failed} of {self.done} rows failed, over the error budget of "
                f"{max_rate:.0%} (--max-error-rate); last error: {outcome.failure.kind}: "
                f"{outcome.failure.message}"
            )


@dataclass(frozen=True, slots=True)
class ClaimConfig:
    """Claim mode: who supplies claims and which evidence each claim is judged against."""

    extractor: ClaimExtractor | AsyncClaimExtractor
    scope: Scope = "cited"


async def judge_claims(
    row: Row, provider: Provider, config: ClaimConfig, thresholds: Thresholds
) -> tuple[list[ClaimResult], list[Reply]]:
    """One request per distinct evidence set; claims are then read back in answer order."""
    extractor = config.extractor
    if isinstance(extractor, ClaimExtractor):
        claims = extractor.extract(row)
    else:
        claims = await extractor.extract_async(row)
    answers: dict[str, dict[str, float]] = {}
    replies = []
    for group in claim_groups(row, claims, config.scope, provider.model):
        reply = await provider.fetch_answers(Call(request=group.request, row=row))
        replies.append(reply)
        for qid, answer in reply.answers.items():
            if isinstance(answer, ChoiceAnswer):
                answers[qid.removeprefix(CLAIM_PREFIX)] = answer.probabilities
    results = [
        claim_result(
            claim,
            evidence_of(claim, row, config.scope),
            answers.get(claim.id),
            thresholds.pass_,
        )
        for claim in claims
    ]
    return results, replies


def row_requests(row: Row, model: str, context_order: str) -> list[JevRequest]:
    """The row's request(s) under ``--context-order``: as-is, reversed, or both in that order."""
    if context_order == "as-is":
        return [build_request(row, model)]
    if context_order == "reversed":
        return [reversed_request(row, model)]
    return [build_request(row, model), reversed_request(row, model)]


def averaged(replies: list[Reply]) -> dict[str, float]:
    """P(true) per question id, averaged over the replies (``--context-order both``)."""
    if len(replies) == 1:
        return replies[0].probabilities()
    tables = [r.probabilities() for r in replies]
    return {qid: math.fsum(t[qid] for t in tables) / len(tables) for qid in tables[0]}


async def judge_row(
    row: Row,
    provider: Provider,
    thresholds: Thresholds,
    claims: ClaimConfig | None = None,
    context_order: str = "as-is",
) -> JevOutcome:
    """The row's Jev call(s), then the policy; a ProviderError becomes a failed row.

    Calls of one row run one after another, so its latency is their sum.
    """
    replies: list[Reply] = []
    try:
        for request in row_requests(row, provider.model, context_order):
            replies.append(await provider.fetch_answers(Call(request=request, row=row)))
        results, claim_replies = (
            await judge_claims(row, provider, claims, thresholds) if claims else ([], [])
        )
    except ProviderError as exc:
        failure = RowFailure(kind=exc.kind, message=str(exc), retries=exc.retries)
        spent = math.fsum(r.latency_ms for r in replies)
        return JevOutcome(None, None, None, failure, spent + exc.wall_ms)
    reply = replies[0]
    judgments = read_judgments(row, averaged(replies))
    summary = summarize_claims(results) if claims else None
    verdict = diagnose(judgments, thresholds, summary)
    latency = math.fsum([*(r.latency_ms for r in replies), *(r.latency_ms for r in claim_replies)])
    return JevOutcome(
        _spent(reply),
        judgments,
        verdict,
        None,
        latency,
        claims=tuple(results) if claims else None,
        claim_summary=summary,
        claim_replies=tuple(_spent(r) for r in claim_replies),
        order_replies=tuple(_spent(r) for r in replies[1:]),
    )


async def judge_trace(trace: Trace, provider: Provider, thresholds: Thresholds) -> JevOutcome:
    """A request per judged step, in step order, then the trace's policy; a step whose call
    fails makes the trace a failed row (never a verdict), named by the step."""
    replies: list[Reply] = []
    judged: dict[int, StepJudgments] = {}
    decisions: dict[int, str] = {}
    for asked in step_requests(trace, provider.model):
        call = Call(request=asked.request, row=trace, step=asked.step)
        try:
            reply = await provider.fetch_answers(call)
        except ProviderError as exc:
            kind = trace.steps[asked.step].kind
            message = f"step {asked.step} ({kind}): {exc}"
            failure = RowFailure(kind=exc.kind, message=message, retries=exc.retries)
            spent = math.fsum(r.latency_ms for r in replies)
            judged_so_far = TraceJudged(trace, judged, decisions, None)
            return JevOutcome(None, None, None, failure, spent + exc.wall_ms, trace=judged_so_far)
        judged[asked.step] = read_step_judgments(trace, asked.step, reply.probabilities())
        decisions[asked.step] = asked.decision_id
        replies.append(_spent(reply))
    verdict = diagnose_trace(trace, judged, thresholds)
    return JevOutcome(
        replies[0],
        None,
        verdict.verdict,
        None,
        math.fsum(r.latency_ms for r in replies),
        trace=TraceJudged(trace, judged, decisions, verdict),
        step_replies=tuple(replies[1:]),
    )


def _spent(reply: Reply) -> Reply:
    """The reply without its raw answers, once they are read: the outcome keeps what the report
    needs (model, usage, latency, request id); the answers live on in the cache."""
    return reply.model_copy(update={"answers": {}})


async def judge_item(item: Row | Trace, provider: Provider, config: RunConfig) -> JevOutcome:
    if isinstance(item, Trace):
        return await judge_trace(item, provider, config.thresholds)
    return await judge_row(item, provider, config.thresholds, config.claims, config.context_order)


def outcome_row(item: Row | Trace, jev: JevOutcome) -> Row:
    """What the outcome keeps of the row: the row without its mock block (it has served its
    call), or a trace's deciding turn seen as a row (its steps live on in ``jev.trace``)."""
    if isinstance(item, Trace):
        verdict = jev.trace.verdict if jev.trace is not None else None
        deciding = verdict.deciding_step if verdict is not None else None
        return trace_view(item, deciding)
    return item.model_copy(update={"mock": None}) if item.mock is not None else item


async def baseline_row(row: Row, judge: BaselineJudge) -> BaselineOutcome:
    try:
        return BaselineOutcome(await judge.judge(row), None)
    except ProviderError as exc:
        return BaselineOutcome(None, RowFailure(kind=exc.kind, message=str(exc)))


# Finished rows go to the sink this many at a time: one row's report code running right after
# another's finds its code and state still in the CPU's caches, where, run between two rows'
# calls, it found them cold (bench/bench_parts.py: the report 87 µs a row in a loop, 150-250
# inside a run, the garbage collector's share included; 0.83x the CPU a row at 32 in flight).
SINK_BATCH = 64


class InOrder:
    """Hands finished rows to ``sink`` in input order, whatever order they finish in.

    A row that finishes early waits here until every row before it is done; the producer
    sends row ``k`` only once fewer than ``window`` rows are waiting (:meth:`admit`), so a
    slow row holds back at most ``window`` finished ones, however long the run. Rows whose
    turn has come go to the sink :data:`SINK_BATCH` at a time; :meth:`flush` hands on the
    rest (at the end of the rows, or when the run is stopped).
    """

    def __init__(self, sink: Callable[[RowOutcome], None], window: int) -> None:
        self.sink = sink
        self.window = window
        self.next = 0
        self.waiting: dict[int, RowOutcome] = {}
        self.ready: list[RowOutcome] = []
        self.advanced = anyio.Event()

    async def admit(self, position: int) -> None:
        while position >= self.next + self.window:
            await self.advanced.wait()

    def put(self, position: int, outcome: RowOutcome) -> None:
        self.waiting[position] = outcome
        start = self.next
        while self.next in self.waiting:
            self.ready.append(self.waiting.pop(self.next))
            self.next += 1
        if self.next != start:
            if len(self.ready) >= SINK_BATCH:
                self.flush()
            self.advanced.set()
            self.advanced = anyio.Event()

    def flush(self) -> None:
        """Hand every row whose turn has come to the sink."""
        ready, self.ready = self.ready, []
        for outcome in ready:
            self.sink(outcome)


def read_ahead(rows: Iterable[T], count: int) -> Iterator[T]:
    """``rows``, pulled ``count`` at a time (so they are read and parsed back to back, warm:
    see :data:`SINK_BATCH`) and handed on one by one. An error raised while pulling comes
    after the rows pulled before it, as it would without the read-ahead."""
    source = iter(rows)
    while True:
        chunk: list[T] = []
        try:
            for _ in range(count):
                chunk.append(next(source))
        except StopIteration:
            yield from chunk
            return
        except Exception:
            yield from chunk
            raise
        yield from chunk


def reorder_window(concurrency: int) -> int:
    """How many finished rows may wait for a slow one before the producer pauses."""
    return max(4096, 128 * concurrency)


async def run_batch(
    rows: Iterable[Row | Trace],
    provider: Provider,
    baseline: BaselineJudge,
    config: RunConfig,
    on_row: Callable[[RowOutcome], None] | None = None,
) -> list[RowOutcome]:
    """Evaluate every row; the returned list is in input order."""
    return await run_indexed(enumerate(rows), provider, baseline, config, on_row)


async def run_indexed(
    rows: Iterable[tuple[int, Row | Trace]],
    provider: Provider,
    baseline: BaselineJudge,
    config: RunConfig,
    on_row: Callable[[RowOutcome], None] | None = None,
) -> list[RowOutcome]:
    """Evaluate (input index, row) pairs, e.g. one shard of a file; in input order."""
    outcomes: list[RowOutcome] = []
    await run_stream(rows, provider, baseline, config, outcomes.append, on_row)
    return outcomes


async def run_stream(
    rows: Iterable[tuple[int, Row | Trace]],
    provider: Provider,
    baseline: BaselineJudge,
    config: RunConfig,
    in_order: Callable[[RowOutcome], None],
    on_row: Callable[[RowOutcome], None] | None = None,
) -> int:
    """Evaluate (input index, row) pairs; ``in_order`` gets each outcome in input order once
    the rows before it are done (:data:`SINK_BATCH` at a time, the rest when the rows end or
    the run is stopped), ``on_row`` as soon as it finishes. Nothing is kept: memory does not
    grow with the number of rows. Returns the number of rows."""
    if config.concurrency < 1:
        raise ValueError("concurrency must be >= 1")
    error_budget = ErrorBudget(config)
    ordered = InOrder(in_order, reorder_window(config.concurrency))

    async def worker(receive: MemoryObjectReceiveStream[tuple[int, int, Row | Trace]]) -> None:
        # A row's cache writes go to the next commit while the worker goes on; they are on
        # disk before it sends another request and before it ends (see cache._writer).
        async with receive, deferred_writes():
            async for position, index, item in receive:
                jev = await judge_item(item, provider, config)
                error_budget.record(jev)
                row = outcome_row(item, jev)
                base = await baseline_row(row, baseline)
                decision = trace_decision(item) if isinstance(item, Trace) else decision_for(row)
                outcome = RowOutcome(index, row, decision, jev, base)
                if on_row is not None:
                    on_row(outcome)
                ordered.put(position, outcome)

    send, receive = anyio.create_memory_object_stream[tuple[int, int, Row | Trace]](
        config.concurrency
    )
    sent = 0
    try:
        async with anyio.create_task_group() as tg:
            for _ in range(config.concurrency):
                tg.start_soon(worker, receive.clone())
            receive.close()
            async with send:
                for position, (index, row) in enumerate(read_ahead(rows, SINK_BATCH)):
                    await ordered.admit(position)
                    await send.send((position, index, row))
                    sent = position + 1
    except anyio.get_cancelled_exc_class():
        ordered.flush()  # a stopped run's report counts every row that finished in order
        raise
    ordered.flush()
    return sent
