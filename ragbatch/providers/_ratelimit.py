"""Rate control for live calls: adaptive concurrency and request/token budgets (async).

* ``--concurrency`` is a ceiling. The current limit halves on every 429/529 and grows back by
  one after ``limit`` consecutive successes (additive increase, multiplicative decrease), so a
  throttled run backs off at once and recovers slowly. When the 429 says how long to wait
  (``Retry-After``), no call is sent before then: waiting calls do not rush a throttled service.
* ``--max-rps`` and ``--max-tokens-per-s`` are token buckets. Input tokens are reserved from
  an estimate before sending and reconciled with the ``usage`` the reply reports; an
  underestimate leaves the bucket in debt, which later calls wait out.

The clock and the sleep are injectable, so tests run on a fake clock without real sleeps.
"""

from __future__ import annotations

import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import anyio

SHORTFALL_EPSILON = 1e-9  # tokens; a smaller shortfall counts as none


@dataclass
class Bucket:
    """A token bucket: ``rate`` per second, bursts up to ``capacity``; may go into debt."""

    rate: float
    capacity: float
    clock: Callable[[], float] = time.monotonic
    level: float = field(init=False)
    stamp: float = field(init=False)

    def __post_init__(self) -> None:
        self.level = self.capacity
        self.stamp = self.clock()

    def _refill(self) -> None:
        now = self.clock()
        self.level = min(self.capacity, self.level + (now - self.stamp) * self.rate)
        self.stamp = now

    def wait_time(self, amount: float) -> float:
        """Seconds until ``amount`` can be taken (0 when it can be taken now)."""
        self._refill()
        need = min(amount, self.capacity) - self.level
        # Float rounding can leave a shortfall of ~1e-16 after waiting exactly the time
        # asked: its wait is too small to move the clock (a fake clock then never advances).
        return need / self.rate if need > SHORTFALL_EPSILON else 0.0

    def take(self, amount: float) -> None:
        self._refill()
        self.level -= amount

    def give_back(self, amount: float) -> None:
        """Reconcile: a negative amount charges more (the estimate was too low)."""
        self._refill()
        self.level = min(self.capacity, self.level + amount)


@dataclass
class LimiterStats:
    in_flight: int = 0
    peak_in_flight: int = 0
    throttled: int = 0
    current_limit: int = 0
    lowest_limit: int = 0


class RateLimiter:
    """Adaptive concurrency plus optional request and token budgets, shared by all calls."""

    def __init__(
        self,
        concurrency: int,
        *,
        max_rps: float | None = None,
        max_tokens_per_s: float | None = None,
        adaptive: bool = True,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
    ) -> None:
        self.ceiling = concurrency
        self.adaptive = adaptive
        self._slots = anyio.CapacityLimiter(concurrency)
        self._lock = anyio.Lock()
        self._sleep = sleep
        self._clock = clock
        self._successes = 0
        self._epoch = 0  # bumped on every halving of the limit
        self._resume_at = -math.inf  # no call is sent before this clock time (Retry-After)
        self._hold_reason = ""  # what asked for the hold, for the progress display
        # A burst of one request: with a burst of ``max_rps`` the first second could carry
        # twice the ceiling (a full bucket plus its refill).
        self.requests = Bucket(max_rps, 1.0, clock) if max_rps else None
        self.tokens = (
            Bucket(max_tokens_per_s, max_tokens_per_s, clock) if max_tokens_per_s else None
        )
        self.stats = LimiterStats(current_limit=concurrency, lowest_limit=concurrency)

    @property
    def limit(self) -> int:
        return int(self._slots.total_tokens)

    async def _await_budget(self, tokens: int) -> None:
        if self.requests is None and self.tokens is None and self._resume_at <= self._clock():
            return  # no budget to take from and no hold: nothing to wait for (the common case)
        # One caller at a time takes from the buckets, so waiting callers are served in order.
        async with self._lock:
            while True:
                wait = self._resume_at - self._clock()
                if self.requests is not None:
                    wait = max(wait, self.requests.wait_time(1))
                if self.tokens is not None:
                    wait = max(wait, self.tokens.wait_time(tokens))
                if wait <= 0:
                    break
                await self._sleep(wait)
            if self.requests is not None:
                self.requests.take(1)
            if self.tokens is not None:
                self.tokens.take(tokens)

    @asynccontextmanager
    async def slot(self, estimated_tokens: int) -> AsyncIterator[int]:
        """Hold one concurrency slot and the budget for one call while it is in flight.

        Yields the limiter's epoch at admission: pass it to :meth:`on_throttled` so that a
        burst of 429s from calls admitted under the same limit halves it once, not once each.
        """
        async with self._slots:
            await self._await_budget(estimated_tokens)
            self.stats.in_flight += 1
            self.stats.peak_in_flight = max(self.stats.peak_in_flight, self.stats.in_flight)
            try:
                yield self._epoch
            finally:
                self.stats.in_flight -= 1

    def settle(self, estimated_tokens: int, actual_tokens: int) -> None:
        """Reconcile a reservation with the usage the service reported."""
        if self.tokens is not None:
            self.tokens.give_back(estimated_tokens - actual_tokens)

    def on_throttled(
        self, retry_after: float | None = None, epoch: int | None = None, reason: str = ""
    ) -> None:
        """A 429/529: halve the concurrency limit (never below 1); hold every call for
        ``retry_after`` seconds when the service said how long to wait (``reason`` says why,
        for :meth:`hold`). A call admitted before the last halving (an older ``epoch``) does
        not halve it again."""
        self.stats.throttled += 1
        self._successes = 0
        if retry_after is not None and retry_after > 0:
            until = self._clock() + retry_after
            if until >= self._resume_at:
                self._resume_at, self._hold_reason = until, reason or "throttled"
        if not self.adaptive or (epoch is not None and epoch != self._epoch):
            return
        self._epoch += 1
        new = max(1, math.ceil(self.limit / 2))
        self._slots.total_tokens = new
        self.stats.current_limit = new
        self.stats.lowest_limit = min(self.stats.lowest_limit, new)

    def hold(self) -> tuple[str, float] | None:
        """The global hold in force: (why, seconds left), or None when calls may go."""
        left = self._resume_at - self._clock()
        return (self._hold_reason, left) if left > 0 else None

    def on_success(self) -> None:
        """Grow the limit by one after ``limit`` consecutive successes, up to the ceiling."""
        if not self.adaptive or self.limit >= self.ceiling:
            return
        self._successes += 1
        if self._successes >= self.limit:
            self._successes = 0
            self._slots.total_tokens = self.limit + 1
            self.stats.current_limit = self.limit
