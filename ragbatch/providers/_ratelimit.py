"""Rate control for live calls: adaptive concurrency and request/token budgets (async).

* ``--concurrency`` is a ceiling. The current limit halves on every 429/529 and grows back by
  one after ``limit`` consecutive successes (additive increase, multiplicative decrease), so a
  throttled run backs off at once and recovers slowly. When the 429 says how long to wait
  (``Retry-After``), no call is sent before then: waiting calls do not rush a throttled service.
* ``--max-rps`` and ``--max-tokens-per-s`` are token buckets. Input tokens are reserved from
  an estimate before sending and reconciled with the ``usage`` the reply reports; an
  underestimate leaves the bucket in debt, which later calls wait out.

The clock and the sleep are injectable, so tests run on a fake clock without real sleeps.

The concurrency slots are :class:`Slots`, not anyio's ``CapacityLimiter``: taking a free one
does not yield to the event loop (the ``CapacityLimiter`` does, once a call: one more wake-up of
every row's whole chain of coroutines). The live path runs on asyncio
(its own wire, or aiohttp's through a proxy), so its futures are asyncio's.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from types import TracebackType

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


class Slots:
    """A counting semaphore whose size may change while slots are held (the adaptive limit);
    callers wait in arrival order. A cancelled waiter leaves the queue; one cancelled just as
    it was given a slot passes the slot on."""

    __slots__ = ("_waiters", "taken", "total")

    def __init__(self, total: int) -> None:
        self.total = total
        self.taken = 0
        self._waiters: deque[asyncio.Future[None]] = deque()

    async def acquire(self) -> None:
        if self.taken < self.total and not self._waiters:
            self.taken += 1  # a free slot and nobody before us: no wait, no yield
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                self.release()  # given a slot as it was cancelled: the next one takes it
            else:
                with contextlib.suppress(ValueError):
                    self._waiters.remove(waiter)
            raise

    def release(self) -> None:
        self.taken -= 1
        self._wake()

    def resize(self, total: int) -> None:
        """A new limit: held slots are kept (over a lower limit, no new one is given until
        enough are released); a higher one lets waiters in at once."""
        self.total = total
        self._wake()

    def _wake(self) -> None:
        while self._waiters and self.taken < self.total:
            waiter = self._waiters.popleft()
            if not waiter.done():
                self.taken += 1
                waiter.set_result(None)


class _Slot:
    """``async with limiter.slot(tokens) as epoch``: one slot and the budget of one call."""

    __slots__ = ("_limiter", "_tokens")

    def __init__(self, limiter: RateLimiter, tokens: int) -> None:
        self._limiter, self._tokens = limiter, tokens

    async def __aenter__(self) -> int:
        limiter = self._limiter
        await limiter._slots.acquire()
        try:
            await limiter._await_budget(self._tokens)
        except BaseException:
            limiter._slots.release()
            raise
        stats = limiter.stats
        stats.in_flight += 1
        stats.peak_in_flight = max(stats.peak_in_flight, stats.in_flight)
        return limiter._epoch

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._limiter.stats.in_flight -= 1
        self._limiter._slots.release()


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
        self._slots = Slots(concurrency)
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
        return self._slots.total

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

    def slot(self, estimated_tokens: int) -> _Slot:
        """Hold one concurrency slot and the budget for one call while it is in flight.

        Yields the limiter's epoch at admission: pass it to :meth:`on_throttled` so that a
        burst of 429s from calls admitted under the same limit halves it once, not once each.
        """
        return _Slot(self, estimated_tokens)

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
        self._slots.resize(new)
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
            self._slots.resize(self.limit + 1)
            self.stats.current_limit = self.limit
