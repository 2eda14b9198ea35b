"""Watching a run on stderr: a rich live display on a terminal, plain lines in CI (I/O).

Shows rows done/total, rows/s, ETA, cache hit rate, calls in flight and the current adaptive
concurrency, retries and 429s so far, a global hold in force (why, seconds left), failures and
money spent so far (priced with the snapshot). :meth:`Progress.tick` refreshes it while no row
finishes. Nothing here feeds the report.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TextIO

import anyio

from ragbatch.core import PricingSnapshot, RowOutcome, total_cost
from ragbatch.data import scan_lines


@dataclass
class Snapshot:
    """Live counters other parts of the run expose (each optional)."""

    cache_hits: Callable[[], int] = lambda: 0
    cache_lookups: Callable[[], int] = lambda: 0
    in_flight: Callable[[], int] = lambda: 0
    concurrency: Callable[[], int] = lambda: 0
    retries: Callable[[], int] = lambda: 0
    throttled: Callable[[], int] = lambda: 0
    hold: Callable[[], tuple[str, float] | None] = lambda: None  # (why, seconds left)


@dataclass
class Progress:
    """Receives every finished row (``on_row``) and reports at most every ``interval`` s."""

    total: int | None
    pricing: PricingSnapshot
    live: Snapshot = field(default_factory=Snapshot)
    label: str = ""  # e.g. "shard 1/3": its rows are what ``total`` counts
    mode: str = "auto"  # auto | rich | plain | none
    interval: float = 5.0
    stream: TextIO = field(default_factory=lambda: sys.stderr)
    done: int = 0
    failed: int = 0
    tokens: dict[str, list[int]] = field(default_factory=dict)
    started: float = field(default_factory=time.perf_counter)
    last: float = 0.0

    def __post_init__(self) -> None:
        if self.mode == "auto":
            self.mode = "rich" if self.stream.isatty() else "plain"
        self._rich = None
        if self.mode == "rich":
            from rich.console import Console
            from rich.live import Live

            self._rich = Live(
                console=Console(file=self.stream), refresh_per_second=4, transient=True
            )
            self._rich.start()

    def on_row(self, outcome: RowOutcome) -> None:
        self.done += 1
        self.failed += outcome.jev.failure is not None
        for reply in outcome.jev.replies:
            if not reply.cached:
                totals = self.tokens.setdefault(reply.model, [0, 0])
                totals[0] += reply.usage.input_tokens
                totals[1] += reply.usage.output_tokens
        self.refresh()

    def refresh(self) -> None:
        """Update the live display, or print a plain line if ``interval`` s have passed."""
        now = time.perf_counter()
        if self.mode == "rich" and self._rich is not None:
            self._rich.update(self.line())
        elif self.mode == "plain" and now - self.last >= self.interval:
            self.last = now
            print(self.line(), file=self.stream, flush=True)

    async def tick(self) -> None:
        """Refresh every ``interval`` s (1 s for 0) while no row finishes, e.g. during a hold;
        runs until cancelled."""
        period = self.interval if self.interval > 0 else 1.0
        while True:
            await anyio.sleep(period)
            self.refresh()

    def spent(self) -> float:
        cost = total_cost(self.pricing, ((m, t[0], t[1]) for m, t in self.tokens.items()))
        return cost.usd or 0.0

    def line(self) -> str:
        elapsed = max(time.perf_counter() - self.started, 1e-9)
        rate = self.done / elapsed
        total = f"/{self.total}" if self.total is not None else ""
        eta = ""
        if self.total is not None and rate > 0:
            eta = f", ETA {max(self.total - self.done, 0) / rate:.0f} s"
        lookups = self.live.cache_lookups()
        hits = f", cache hits {self.live.cache_hits() / lookups:.0%}" if lookups else ""
        calls = ""
        if self.live.concurrency():
            calls = (
                f", in flight {self.live.in_flight()} (concurrency {self.live.concurrency()}), "
                f"retries {self.live.retries()}, 429s {self.live.throttled()}"
            )
        if (hold := self.live.hold()) is not None:
            reason, left = hold
            calls += f", on hold {math.ceil(left)} s more ({reason})"
        label = f" ({self.label})" if self.label else ""
        return (
            f"progress{label}: {self.done}{total} rows, {rate:.1f} rows/s{eta}{hits}{calls}, "
            f"failures {self.failed}, spent {self.pricing.currency} {self.spent():.6f} "
            f"(pricing {self.pricing.version})"
        )

    def close(self) -> None:
        if self._rich is not None:
            self._rich.stop()
        elif self.mode == "plain" and self.done:
            print(self.line(), file=self.stream, flush=True)


def count_lines(path: str) -> int | None:
    """Non-blank lines of a file (the total for the progress display), or None if unreadable."""
    try:
        with open(path, "rb") as handle:
            return sum(1 for line in scan_lines(handle) if line.strip())
    except OSError:
        return None
