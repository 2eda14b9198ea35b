"""The test server's input-token bucket: a burst capacity refilled at a steady rate (threads).

Imitates the service's rate limit as peers measured it (a burst, then a sustained rate), so
that 429 with ``retry-after-ms`` comes from the same arithmetic a real limiter would use.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable


class TokenBucket:
    """``capacity`` tokens, refilled at ``refill_per_s``; thread-safe.

    ``clock`` (seconds) is read once per :meth:`take`: a test passes a clock that moves only
    when it says so (or by a step per request), so what is throttled does not depend on how
    fast a loaded machine runs the client.
    """

    def __init__(
        self,
        capacity: float,
        refill_per_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.capacity, self.rate, self.clock = capacity, refill_per_s, clock
        self.tokens, self.stamp = capacity, clock()
        self.lock = threading.Lock()

    def take(self, need: int) -> int | None:
        """Spend ``need`` tokens and return None, or return the ms until they refill."""
        with self.lock:
            now = self.clock()
            self.tokens = min(self.capacity, self.tokens + (now - self.stamp) * self.rate)
            self.stamp = now
            if self.tokens >= need:
                self.tokens -= need
                return None
            if self.rate <= 0:  # never refills: tell the client to wait a long time
                return 60_000
            return max(1, math.ceil((need - self.tokens) / self.rate * 1000))
