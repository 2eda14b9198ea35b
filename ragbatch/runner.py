"""Streams rows through concurrent provider calls: the ONLY task group (async I/O).

Producer -> bounded memory object stream -> ``concurrency`` workers. Each worker asks Jev for
one row (one request, every question), applies the policy, asks the baseline judge, and stores
the outcome under the row's input index, so the result is in input order whatever order the
calls finish in. A call that fails is recorded as a failed row and the run goes on; only
:class:`~ragbatch.errors.RunAborted` (or a bug) stops it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream

from ragbatch.errors import ProviderError, RowFailure, RunAborted
from ragbatch.outcome import BaselineOutcome, JevOutcome, RowOutcome
from ragbatch.policy import Thresholds, diagnose
from ragbatch.providers.base import Call, Provider
from ragbatch.providers.baseline import BaselineJudge
from ragbatch.questions import build_request, decision_for, read_judgments
from ragbatch.schema import Row


@dataclass(frozen=True, slots=True)
class RunConfig:
    concurrency: int = 32
    thresholds: Thresholds = field(default_factory=Thresholds)
    # Stop the run when more than this share of rows failed (after ``error_budget_rows``).
    max_error_rate: float | None = None
    error_budget_rows: int = 20


class ErrorBudget:
    """Aborts the run once the share of failed rows exceeds the budget."""

    def __init__(self, config: RunConfig) -> None:
        self.config = config
        self.done = 0
        self.failed = 0

    def record(self, outcome: JevOutcome) -> None:
        self.done += 1
        if outcome.failure is None:
            return
        self.failed += 1
        budget = self.config.max_error_rate
        if budget is None or self.done < self.config.error_budget_rows:
            return
        if self.failed / self.done > budget:
            raise RunAborted(
                f"{self.failed} of {self.done} rows failed, over the error budget of "
                f"{budget:.0%} (--max-error-rate); last error: {outcome.failure.kind}: "
                f"{outcome.failure.message}"
            )


async def judge_row(row: Row, provider: Provider, thresholds: Thresholds) -> JevOutcome:
    """One Jev call for the row, then the policy; a ProviderError becomes a failed row."""
    request = build_request(row, provider.model)
    try:
        reply = await provider.fetch_answers(Call(request=request, row=row))
    except ProviderError as exc:
        failure = RowFailure(kind=exc.kind, message=str(exc))
        wall = exc.wall_ms
        return JevOutcome(None, None, None, failure, wall)
    judgments = read_judgments(row, reply.probabilities())
    verdict = diagnose(judgments, thresholds)
    return JevOutcome(reply, judgments, verdict, None, reply.latency_ms)


async def baseline_row(row: Row, judge: BaselineJudge) -> BaselineOutcome:
    try:
        return BaselineOutcome(await judge.judge(row), None)
    except ProviderError as exc:
        return BaselineOutcome(None, RowFailure(kind=exc.kind, message=str(exc)))


async def run_batch(
    rows: Iterable[Row],
    provider: Provider,
    baseline: BaselineJudge,
    config: RunConfig,
    on_row: Callable[[RowOutcome], None] | None = None,
) -> list[RowOutcome]:
    """Evaluate every row; the returned list is in input order."""
    if config.concurrency < 1:
        raise ValueError("concurrency must be >= 1")
    results: dict[int, RowOutcome] = {}
    budget = ErrorBudget(config)

    async def worker(receive: MemoryObjectReceiveStream[tuple[int, Row]]) -> None:
        async with receive:
            async for index, row in receive:
                jev = await judge_row(row, provider, config.thresholds)
                budget.record(jev)
                base = await baseline_row(row, baseline)
                outcome = RowOutcome(index, row, decision_for(row), jev, base)
                results[index] = outcome
                if on_row is not None:
                    on_row(outcome)

    send, receive = anyio.create_memory_object_stream[tuple[int, Row]](config.concurrency)
    async with anyio.create_task_group() as tg:
        for _ in range(config.concurrency):
            tg.start_soon(worker, receive.clone())
        receive.close()
        async with send:
            for index, row in enumerate(rows):
                await send.send((index, row))
    return [results[i] for i in range(len(results))]
