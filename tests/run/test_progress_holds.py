"""A global hold (a 429's Retry-After) shows in the progress output: why, and time left."""

from __future__ import annotations

import io
import re
from dataclasses import replace
from pathlib import Path

import anyio
import pytest

from ragbatch.core._pricing import parse_pricing
from ragbatch.providers._ratelimit import RateLimiter
from ragbatch.run._progress import Progress, Snapshot
from ragbatch.testing import Fault, JevServer
from tests.conftest import JEV_KEY
from tests.providers.jev_calls import make_call, open_provider, settings_for
from tests.run.test_operations import DATASET, PRICING, cli

HOLD = re.compile(r", on hold (\d+) s more \(HTTP 429, Retry-After 2 s\)")


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_limiter_says_why_and_how_long_it_holds() -> None:
    clock = FakeClock()
    limiter = RateLimiter(4, clock=clock)
    assert limiter.hold() is None
    limiter.on_throttled(30.0, reason="HTTP 429, Retry-After 30 s")
    assert limiter.hold() == ("HTTP 429, Retry-After 30 s", 30.0)
    limiter.on_throttled(5.0, reason="HTTP 529, Retry-After 5 s")  # ends earlier: 429's stays
    clock.now += 20
    assert limiter.hold() == ("HTTP 429, Retry-After 30 s", 10.0)
    clock.now += 10
    assert limiter.hold() is None


def test_the_progress_line_shows_the_hold() -> None:
    stream = io.StringIO()
    live_counts = Snapshot(
        concurrency=lambda: 4, hold=lambda: ("HTTP 429, Retry-After 3600 s, capped at 60 s", 41.2)
    )
    progress = Progress(
        10,
        parse_pricing(Path(PRICING).read_bytes(), PRICING),
        live_counts,
        mode="plain",
        stream=stream,
    )
    assert ", on hold 42 s more (HTTP 429, Retry-After 3600 s, capped at 60 s)," in progress.line()
    progress.refresh()  # printed although no row finished
    assert (
        stream.getvalue().startswith("progress: 0/10 rows") and "on hold 42 s" in stream.getvalue()
    )


@pytest.mark.anyio
async def test_a_capped_retry_after_says_so(jev_server: JevServer) -> None:
    jev_server.push(Fault(kind="status", status=429, retry_after="3600"))
    limiter = RateLimiter(4)
    settings = replace(settings_for(jev_server), retry_after_cap_s=0.5)
    seen: list[tuple[str, float] | None] = []
    async with open_provider(settings, limiter) as provider, anyio.create_task_group() as tg:
        tg.start_soon(provider.fetch_answers, make_call())
        with anyio.fail_after(5):
            while limiter.stats.throttled == 0:  # until the 429 has been read
                await anyio.sleep(0.005)
        seen.append(limiter.hold())
    assert seen[0] is not None
    reason, left = seen[0]
    assert reason == "HTTP 429, Retry-After 3600 s, capped at 0.5 s" and 0 < left <= 0.5
    assert limiter.hold() is None  # over once the call went through


def test_a_run_held_by_a_429_says_so_while_no_row_finishes(
    jev_server: JevServer, tmp_path: Path
) -> None:
    jev_server.push(Fault(kind="status", status=429, retry_after="2"))
    code, _, err = cli(
        "run", DATASET, "--provider", "jev", "--base-url", jev_server.base_url,
        "--model", "jev-1.13.0", "--cache-dir", str(tmp_path / "cache"),
        "--out", str(tmp_path / "r.json"), "--pricing", PRICING,
        "--concurrency", "1", "--progress-interval", "0.2", env={"TYPESAFE_API_KEY": JEV_KEY},
    )  # fmt: skip
    assert code == 0, err
    lefts = [int(m.group(1)) for m in HOLD.finditer(err)]
    assert lefts, err  # lines came during the hold, with its reason
    assert lefts == sorted(lefts, reverse=True) and set(lefts) <= {1, 2}
