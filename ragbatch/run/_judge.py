"""A run's judge kept open for items that arrive over time (``ragbatch watch``; async I/O).

:func:`open_judge` checks the options with the run's one
:func:`~ragbatch.run._preflight.preflight` and builds the parts a run judges with (the provider
chain: cache -> cost limits -> live client with its limiter and retries; the fallback judge;
claim mode; the thresholds or policy) once. :meth:`Judge.outcomes` then judges each batch of
rows and multi-step traces through them, in input order, as :func:`~ragbatch.run._runner.run_stream`
judges a file's rows; :meth:`Judge.builder` starts a report over any of them. The cost limits
count across batches: ``--max-cost`` for the judge's life, ``max_cost_per_hour`` over the
last hour (:class:`~ragbatch.run._budget.SpendLimit`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from typing import cast

from ragbatch.core import ConfigError, Row, RowOutcome, Trace
from ragbatch.data import RowSource
from ragbatch.report import ReportBuilder, RunInfo
from ragbatch.run._budget import BudgetedProvider, SpendLimit
from ragbatch.run._execute import first_error
from ragbatch.run._factory import make_baseline, make_claims, make_provider, run_info
from ragbatch.run._options import RunOptions
from ragbatch.run._preflight import Checked, preflight
from ragbatch.run._runner import RunConfig, run_stream


@dataclass(frozen=True)
class _Named:
    """What :func:`~ragbatch.run._factory.run_info` reads of a reader: its name."""

    name: str


class Judge:
    """The parts of a run, built once, judging batches of items as they come."""

    def __init__(self, checked: Checked, dataset_name: str, stack: ExitStack) -> None:
        o = checked.options
        self.options = o
        self.pricing = checked.pricing
        self.claims = make_claims(o)
        self.baseline = make_baseline(o, stack)
        self.provider, self.cached = make_provider(checked, stack)
        named = cast(RowSource, _Named(dataset_name))  # run_info reads only its name
        self.info: RunInfo = run_info(checked, named, self.baseline, self.provider, self.claims)
        self.config = RunConfig(
            o.rate.concurrency,
            checked.thresholds,
            max_error_rate=o.limits.max_error_rate,
            error_budget_rows=o.limits.error_budget_rows,
            claims=self.claims,
            context_order=o.audit.context_order,
        )

    @property
    def limit(self) -> SpendLimit | None:
        """The cost limits' ledger (None when neither --max-cost nor an hourly cap is set)."""
        found: object = self.provider
        while found is not None:
            if isinstance(found, BudgetedProvider):
                return found.limit
            found = getattr(found, "inner", None)
        return None

    async def outcomes(self, items: Sequence[Row | Trace]) -> list[RowOutcome]:
        """Every item's outcome, in input order (a failed call is a failed row)."""
        kept: list[RowOutcome] = []
        try:
            await run_stream(
                enumerate(items), self.provider, self.baseline, self.config, kept.append
            )
        except BaseExceptionGroup as group:
            error = first_error(group)
            if error is None:
                raise
            raise error from None
        return kept

    def builder(self) -> ReportBuilder:
        """A new report over outcomes of this judge."""
        return ReportBuilder(self.info)

    async def aclose(self) -> None:
        await self.provider.aclose()
        await self.baseline.aclose()
        if self.claims is not None:
            close = getattr(self.claims.extractor, "aclose", None)
            if close is not None:
                await close()


def open_judge(options: RunOptions, dataset_name: str, warn: Callable[[str], None]) -> Judge:
    """Check ``options`` as a run's (no dataset read, no output file) and build its judge;
    the report's dataset is named ``dataset_name``."""
    if options.output.out is not None or options.metrics.slice_by:
        raise ConfigError("a judge writes no report of its own and reads no dataset to slice")
    checked = preflight(options, warn)
    with ExitStack() as stack:
        judge = Judge(checked, dataset_name, stack)
        stack.pop_all()  # the judge holds the caches now: Judge.aclose closes them
    return judge
