"""Rate control of JevProvider's calls: 429s halve the concurrency, the server's token bucket,
--max-rps spacing and Retry-After holding every call (a real server, or a fake clock).
"""

from __future__ import annotations

import itertools
import time
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest

from ragbatch.core._errors import RateLimited
from ragbatch.core._provider import Reply
from ragbatch.core._questions import build_request
from ragbatch.core._schema import Row
from ragbatch.providers._jev import JevProvider
from ragbatch.providers._ratelimit import RateLimiter
from ragbatch.run._job import run_job
from ragbatch.testing import Fault, JevServer, count_input_tokens
from ragbatch.testing.bucket import TokenBucket
from tests.conftest import job_config
from tests.providers.jev_calls import (
    MODEL,
    ROWS,
    StartServer,
    make_call,
    open_provider,
    settings_for,
)


@pytest.mark.anyio
async def test_429s_halve_concurrency(jev_server: JevServer) -> None:
    def first_six(index: int, body: dict[str, Any]) -> Fault | None:
        return Fault(kind="status", status=429, retry_after="0") if index < 6 else None

    jev_server.fault_fn = first_six
    limiter = RateLimiter(8)
    replies: list[Reply] = []

    async def fetch(provider: JevProvider, index: int) -> None:
        replies.append(await provider.fetch_answers(make_call(index)))

    settings = settings_for(jev_server, max_retries=8)
    async with open_provider(settings, limiter) as provider, anyio.create_task_group() as tg:
        for index in range(16):
            tg.start_soon(fetch, provider, index)
    assert len(replies) == 16
    assert limiter.stats.throttled == 6 and provider.retries["429"] == 6
    assert limiter.stats.lowest_limit < 8
    assert limiter.stats.peak_in_flight <= 8


def test_server_token_bucket_throttles_and_every_row_succeeds(
    start_jev_server: StartServer, tmp_path: Path
) -> None:
    sizes = [count_input_tokens(b["state"], b["questions"]) for b in map(request_body, ROWS)]
    # three rows of burst, then ~40 rows a second on a clock that moves 1/80 s a request,
    # however fast the client runs: a request brings back half a row, so the 48 rows cannot
    # go through unthrottled (the 429s' waits, a few ms, are real)
    ticks = itertools.count(step=1 / 80)
    bucket = TokenBucket(3 * max(sizes), 40 * sum(sizes) / len(sizes), clock=lambda: next(ticks))
    server = start_jev_server(token_bucket=bucket)
    result = run_job(job_config(server, tmp_path, max_retries=30))
    report = result.report
    assert report.modes.jev_only.failures.count == 0
    assert server.successful == 48
    assert server.responses_by_status.get(429, 0) > 0
    assert result.record["retriesByStatus"]["429"] == server.responses_by_status[429]
    assert result.record["rateControl"]["lowestConcurrency"] < 8


def request_body(row: Row) -> dict[str, Any]:
    """The JSON body the provider sends for ``row``."""
    body: dict[str, Any] = orjson.loads(build_request(row, MODEL).body())
    return body


@pytest.mark.anyio
async def test_max_rps_spaces_requests(jev_server: JevServer) -> None:
    # how long exactly is checked on a fake clock (below); here: at least the spacing
    limiter = RateLimiter(10, max_rps=20)
    async with open_provider(settings_for(jev_server), limiter) as provider:
        started = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for index in range(10):
                tg.start_soon(provider.fetch_answers, make_call(index))
        elapsed = time.perf_counter() - started
    assert jev_server.successful == 10
    assert elapsed >= 0.4  # nine gaps of 50 ms


class FakeClock:
    """A clock that only moves when the limiter sleeps."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


@pytest.mark.anyio
async def test_max_rps_on_a_fake_clock() -> None:
    clock = FakeClock()
    limiter = RateLimiter(4, max_rps=20, clock=clock, sleep=clock.sleep)
    for _ in range(10):
        async with limiter.slot(100):
            pass
    assert clock.now == pytest.approx(0.45)  # no burst: the first call, then one per 50 ms


@pytest.mark.anyio
async def test_retry_after_holds_every_call_on_a_fake_clock() -> None:
    clock = FakeClock()
    limiter = RateLimiter(4, clock=clock, sleep=clock.sleep)
    limiter.on_throttled(2.0)
    async with limiter.slot(100):
        pass
    assert clock.sleeps == [2.0]
    limiter.on_throttled(None)
    limiter.on_throttled(0.0)
    async with limiter.slot(100):
        pass
    assert clock.sleeps == [2.0]  # no new wait: no (or a zero) Retry-After
    assert (limiter.limit, limiter.stats.throttled, limiter.stats.lowest_limit) == (1, 3, 1)


@pytest.mark.anyio
async def test_retry_after_holds_other_calls_too(jev_server: JevServer) -> None:
    # the limiter's clock only moves when it sleeps: the hold is seen in what it slept
    jev_server.push(Fault(kind="status", status=429, retry_after_ms=300))
    clock = FakeClock()
    limiter = RateLimiter(4, clock=clock, sleep=clock.sleep)
    async with open_provider(settings_for(jev_server, max_retries=0), limiter) as provider:
        with pytest.raises(RateLimited):
            await provider.fetch_answers(make_call(0))  # its 429 asks for 300 ms
        assert clock.sleeps == []
        reply = await provider.fetch_answers(make_call(1))  # another call waits them out
    assert clock.sleeps == [pytest.approx(0.3)] and reply.attempts == 1
    assert jev_server.responses_by_status == {429: 1, 200: 1}


@pytest.mark.anyio
async def test_limiter_without_budgets_does_not_wait() -> None:
    clock = FakeClock()
    limiter = RateLimiter(4, clock=clock, sleep=clock.sleep)
    for _ in range(100):
        async with limiter.slot(1000):
            pass
    assert clock.sleeps == []
    assert limiter.stats.peak_in_flight == 1
