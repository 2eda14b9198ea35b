"""JevProvider against a real Jev test server on 127.0.0.1: what is retried and what is not,
timeouts and deadlines, malformed replies (never judgments, never cached) and in-flight
de-duplication. Retry-After parsing: test_jev_retry_after.py; rate control:
test_jev_rate_control.py; whole jobs: test_jev_jobs.py.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest

from ragbatch.core._errors import ProviderError, RunAborted
from ragbatch.core._provider import Reply
from ragbatch.providers.cache._replies import CachedProvider, ReplyCache
from ragbatch.testing import Fault, JevServer, count_input_tokens
from tests.providers.jev_calls import (
    KEY,
    MODEL,
    SECRET,
    StartServer,
    make_call,
    open_provider,
    settings_for,
)

MALFORMED = [  # JSON that fails the schema (a 200 that is not JSON is retried instead)
    Fault(kind="missing_answer"),
    Fault(kind="extra_answer"),
    Fault(kind="wrong_type"),
    Fault(kind="out_of_range"),
    Fault(kind="nan"),
    Fault(kind="bad_usage"),
    Fault(kind="bad_usage", usage_value="12"),
]


# -- retried and not retried ---------------------------------------------------------------
@pytest.mark.anyio
@pytest.mark.parametrize(
    ("fault", "min_wait_s"),
    [
        (Fault(kind="status", status=429, retry_after_ms=150), 0.15),
        (Fault(kind="status", status=429, retry_after="0"), 0.0),
    ],
)
async def test_429_honours_retry_after_then_succeeds(
    jev_server: JevServer, fault: Fault, min_wait_s: float
) -> None:
    jev_server.push(fault)
    async with open_provider(settings_for(jev_server)) as provider:
        started = time.perf_counter()
        reply = await provider.fetch_answers(make_call())
        elapsed = time.perf_counter() - started
    assert (reply.attempts, reply.retries) == (2, {"429": 1})
    assert reply.model == MODEL and set(reply.answers) == set(make_call().request.questions)
    assert jev_server.responses_by_status == {429: 1, 200: 1}
    # 150 ms is three times the backoff cap: only the header explains the wait (a lower
    # bound: a loaded machine can only make it longer)
    assert min_wait_s <= elapsed
    assert provider.limiter.stats.throttled == 1


@pytest.mark.anyio
async def test_sends_the_request_with_bearer_key_and_nothing_else(jev_server: JevServer) -> None:
    call = make_call()
    async with open_provider(settings_for(jev_server)) as provider:
        reply = await provider.fetch_answers(call)
    assert jev_server.bodies == [orjson.loads(call.request.body())]
    headers = jev_server.headers_seen[0]
    assert headers["authorization"] == f"Bearer {KEY}"
    assert headers["content-type"] == "application/json"
    assert reply.request_id == "req-1" and reply.latency_ms > 0
    assert reply.usage.input_tokens == count_input_tokens(
        jev_server.bodies[0]["state"], jev_server.bodies[0]["questions"]
    )
    assert KEY not in repr(settings_for(jev_server))


@pytest.mark.anyio
@pytest.mark.parametrize("status", [500, 502, 503, 529, 408])
async def test_retryable_status_then_success(jev_server: JevServer, status: int) -> None:
    jev_server.push(Fault(kind="status", status=status))
    async with open_provider(settings_for(jev_server)) as provider:
        reply = await provider.fetch_answers(make_call())
    assert (reply.attempts, reply.retries) == (2, {str(status): 1})
    assert jev_server.responses_by_status == {status: 1, 200: 1}
    assert dict(provider.retries) == {str(status): 1}


@pytest.mark.anyio
async def test_retries_stop_after_max_retries(jev_server: JevServer) -> None:
    jev_server.fault_fn = lambda index, body: Fault(kind="status", status=503)
    async with open_provider(settings_for(jev_server, max_retries=2)) as provider:
        with pytest.raises(ProviderError) as info:
            await provider.fetch_answers(make_call())
    assert (info.value.kind, info.value.status, info.value.retryable) == ("server-error", 503, True)
    assert jev_server.requests_total == 3
    assert info.value.wall_ms > 0


@pytest.mark.anyio
@pytest.mark.parametrize("status", [400, 404, 422])
async def test_request_errors_are_not_retried(jev_server: JevServer, status: int) -> None:
    jev_server.push(Fault(kind="status", status=status, message="the request is wrong"))
    async with open_provider(settings_for(jev_server)) as provider:
        with pytest.raises(ProviderError) as info:
            await provider.fetch_answers(make_call())
    error = info.value
    assert (error.kind, error.status, error.retryable) == (f"http-{status}", status, False)
    assert error.request_id == "req-1"
    assert str(error) == f"HTTP {status}: the request is wrong (request id req-1)"
    assert jev_server.requests_total == 1


@pytest.mark.anyio
@pytest.mark.parametrize("status", [401, 403])
async def test_rejected_key_aborts_without_showing_it(
    start_jev_server: StartServer, status: int
) -> None:
    server = start_jev_server(api_key=SECRET)
    # a gateway that echoes the key back must not get it into our messages
    server.push(Fault(kind="status", status=status, message=f"key {SECRET} is revoked"))
    async with open_provider(settings_for(server, api_key=SECRET)) as provider:
        with pytest.raises(RunAborted) as info:
            await provider.fetch_answers(make_call())
    message = str(info.value)
    assert SECRET not in message
    assert "key *** is revoked" in message and "check TYPESAFE_API_KEY" in message
    assert server.requests_total == 1


# -- timeouts, deadlines, dropped connections ----------------------------------------------
@pytest.mark.anyio
async def test_hung_attempt_times_out_and_is_retried(jev_server: JevServer) -> None:
    jev_server.push(Fault(kind="hang", delay_s=1.0))
    async with open_provider(settings_for(jev_server, attempt_timeout_s=0.2)) as provider:
        started = time.perf_counter()
        reply = await provider.fetch_answers(make_call())
        elapsed = time.perf_counter() - started
    # the retry shows the attempt was cut (the hang would have answered after 1 s)
    assert (reply.attempts, reply.retries) == (2, {"timeout": 1})
    assert elapsed >= 0.2


@contextmanager
def loop_clock_frozen_until(released: threading.Event) -> Iterator[Callable[[], float]]:
    """Freeze the event loop's clock (timeouts, deadlines, sleeps) until ``released`` is set,
    then let it run on from where it stopped. Yields the clock."""
    loop = asyncio.get_running_loop()
    real, frozen_at = loop.time, loop.time()
    resumed: list[float] = []

    def clock() -> float:
        if not released.is_set():
            return frozen_at
        if not resumed:
            resumed.append(real())
        return frozen_at + real() - resumed[0]

    loop.time = clock  # type: ignore[method-assign]
    try:
        yield clock
    finally:
        del loop.time


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("row_deadline_s", "max_retries", "kind"),
    [(0.5, 4, "deadline-exceeded"), (5.0, 1, "timeout")],
)
async def test_persistent_hang_fails_the_row(
    jev_server: JevServer, row_deadline_s: float, max_retries: int, kind: str
) -> None:
    if kind == "deadline-exceeded":
        await deadline_cuts_the_retries_short(jev_server, row_deadline_s, max_retries)
        return
    jev_server.fault_fn = lambda index, body: Fault(kind="hang", delay_s=1.0)
    settings = settings_for(
        jev_server, attempt_timeout_s=0.2, row_deadline_s=row_deadline_s, max_retries=max_retries
    )
    async with open_provider(settings) as provider:
        started = time.perf_counter()
        with pytest.raises(ProviderError) as info:
            await provider.fetch_answers(make_call())
        elapsed = time.perf_counter() - started
    assert info.value.kind == kind  # the attempts timed out: the row deadline did not end it
    assert elapsed >= 0.2 * (max_retries + 1)
    assert jev_server.requests_total == max_retries + 1


async def deadline_cuts_the_retries_short(
    server: JevServer, row_deadline_s: float, max_retries: int
) -> None:
    """Two quick 503s, then a hang that never ends: exactly 3 of the 5 attempts are sent.

    Event-driven, so a loaded machine cannot change the count: the loop's clock stands still
    until the third request has reached the server, and only then runs towards the deadline.
    The first two replies are slowed to 0.3 s each (past the deadline in real time) to show it.
    """
    third_sent = threading.Event()

    def script(index: int, body: dict[str, Any]) -> Fault:
        if index < 2:
            time.sleep(0.3)  # a slow machine: real time passes, the deadline does not
            return Fault(kind="status", status=503)
        third_sent.set()
        return Fault(kind="hang", delay_s=60.0)  # woken when the server stops

    server.fault_fn = script
    settings = replace(
        settings_for(server, attempt_timeout_s=30.0, row_deadline_s=row_deadline_s),
        max_retries=max_retries,
        backoff_initial_s=0.0,  # no timers while the clock stands still
        backoff_max_s=0.0,
    )
    async with open_provider(settings) as provider:
        with loop_clock_frozen_until(third_sent) as clock, pytest.raises(ProviderError) as info:
            started = clock()
            await provider.fetch_answers(make_call())
        elapsed = clock() - started
    assert info.value.kind == "deadline-exceeded"
    assert str(info.value) == f"row deadline of {row_deadline_s} s exceeded after 3 attempt(s)"
    assert info.value.retries == {"503": 2}
    assert server.requests_total == 3
    assert row_deadline_s <= elapsed < 30.0  # the deadline ended the hung attempt, not its timeout


@pytest.mark.anyio
async def test_dropped_connections_fail_as_connection_after_retries(
    jev_server: JevServer,
) -> None:
    jev_server.push(Fault(kind="drop"))
    async with open_provider(settings_for(jev_server, max_retries=2)) as provider:
        reply = await provider.fetch_answers(make_call())
        assert (reply.attempts, reply.retries) == (2, {"connection": 1})
        jev_server.fault_fn = lambda index, body: Fault(kind="drop")
        with pytest.raises(ProviderError) as info:
            await provider.fetch_answers(make_call(1))
    assert (info.value.kind, info.value.retryable) == ("connection", True)
    assert jev_server.responses_by_status == {0: 4, 200: 1}


# -- malformed replies ---------------------------------------------------------------------
@pytest.mark.anyio
@pytest.mark.parametrize("fault", MALFORMED, ids=[f"{f.kind}-{f.usage_value}" for f in MALFORMED])
async def test_malformed_reply_fails_and_is_not_cached(
    jev_server: JevServer, tmp_path: Path, fault: Fault
) -> None:
    cache = ReplyCache(tmp_path / "cache")
    call = make_call()
    async with open_provider(settings_for(jev_server)) as provider:
        jev_server.push(fault)
        with pytest.raises(ProviderError) as info:
            await provider.fetch_answers(call)
        assert (info.value.kind, info.value.retryable) == ("malformed-response", False)
        assert jev_server.requests_total == 1  # not retried

        cached = CachedProvider(provider, cache)
        jev_server.push(fault)
        with pytest.raises(ProviderError):
            await cached.fetch_answers(call)
        assert len(cache) == 0 and cached.stats.writes == 0
        first = await cached.fetch_answers(call)  # asks the server again
        again = await cached.fetch_answers(call)
    assert jev_server.requests_total == 3
    assert not first.cached and again.cached and again.answers == first.answers
    assert len(cache) == 1
    cache.close()


# -- identical requests in flight ----------------------------------------------------------
@pytest.mark.anyio
async def test_identical_requests_in_flight_are_sent_once(
    start_jev_server: StartServer, tmp_path: Path
) -> None:
    server = start_jev_server(latency_s=0.2)
    cache = ReplyCache(tmp_path / "cache")
    replies: list[Reply] = []
    async with open_provider(settings_for(server)) as provider:
        cached = CachedProvider(provider, cache)

        async def fetch() -> None:
            replies.append(await cached.fetch_answers(make_call()))

        async with anyio.create_task_group() as tg:
            tg.start_soon(fetch)
            tg.start_soon(fetch)
    cache.close()
    assert server.successful == 1 and server.requests_total == 1
    assert cached.stats.deduplicated >= 1
    assert replies[0].answers == replies[1].answers
    assert sorted(r.cached for r in replies) == [False, True]
