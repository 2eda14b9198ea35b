"""The test server's input-token bucket: a burst capacity refilled at a steady rate (threads).

Imitates the service's rate limit as peers measured it (a burst, then a sustained rate), so
that 429 with ``retry-after-ms`` comes from the same arithmetic a real limiter would use.
"""

from __future__ import annotations

import math
import threading
import time


class TokenBucket:
    """``capacity`` tokens, refilled at ``refill_per_s``; thread-safe."""

    def __init__(self, capacity: float, refill_per_s: float) -> None:
        self.capacity, self.rate = capacity, refill_per_s
        self.tokens, self.stamp = capacity, time.monotonic()
        self.lock = threading.Lock()

    def take(self, need: int) -> int | None:
        """Spend ``need`` tokens and return None, or return the ms until they refill."""
        with self.lock:
            now = time.monotonic()
            self.tokens = min(self.capacity, self.tokens + (now - self.stamp) * self.rate)
            self.stamp = now
            if self.tokens >= need:
                self.tokens -= need
                return None
            if self.rate <= 0:  # never refills: tell the client to wait a long time
                return 60_000
            return max(1, math.ceil((need - self.tokens) / self.rate * 1000))
