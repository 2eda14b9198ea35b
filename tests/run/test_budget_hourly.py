"""The rolling hourly cap of the spend limit (``ragbatch watch --max-cost-per-hour``): an
attempt that would pass it is refused with kind ``hourly-budget`` (the trace waits, it has not
failed), and the money spent an hour ago stops counting."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragbatch.core import BUDGET_KIND
from ragbatch.core._pricing import parse_pricing
from ragbatch.run._budget import HOURLY_KIND, SpendLimit

ROOT = Path(__file__).resolve().parents[2]
PRICING = parse_pricing((ROOT / "pricing/typesafe-2026-12.json").read_bytes(), "the snapshot")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_an_hour_s_spending_refuses_until_it_ages_out() -> None:
    clock = Clock()
    limit = SpendLimit(None, PRICING, per_hour=1.0, clock=clock)
    assert limit.refusal(0.6) is None
    limit.settle(0.6, 0.5)  # spent 0.5 at t=1000
    assert limit.refusal(0.4) is None  # 0.5 spent + 0.4 reserved <= 1.0
    refused = limit.refusal(0.2)  # 0.5 + 0.4 + 0.2 > 1.0
    assert refused is not None and refused.kind == HOURLY_KIND
    assert "--max-cost-per-hour 1.0" in str(refused)
    assert not limit.exhausted  # not the run's budget: nothing is given up
    clock.now += 10.0
    limit.settle(0.4, 0.4)  # spent 0.4 at t=1010
    clock.now += 3589.0
    assert limit.spent_last_hour() == pytest.approx(0.9)
    assert limit.refusal(0.2) is not None
    clock.now += 1.0  # the first 0.5 was settled an hour ago
    assert limit.spent_last_hour() == pytest.approx(0.4)
    assert limit.refusal(0.2) is None
    assert limit.spent == pytest.approx(0.9)  # the whole life's spending is kept apart


def test_the_run_s_maximum_still_ends_the_run() -> None:
    limit = SpendLimit(1.0, PRICING, per_hour=10.0, clock=Clock())
    limit.settle(0.0, 0.9)
    refused = limit.refusal(0.2)
    assert refused is not None and refused.kind == BUDGET_KIND and limit.exhausted


def test_a_restarted_watcher_counts_what_it_recorded() -> None:
    clock = Clock()
    limit = SpendLimit(None, PRICING, per_hour=1.0, clock=clock)
    limit.record(clock.now - 10, 0.95)  # from the state file's ledger
    refused = limit.refusal(0.1)
    assert refused is not None and refused.kind == HOURLY_KIND
