"""JevProvider, RateLimiter and whole jobs against a real Jev test server on 127.0.0.1.

Covers retries (what is retried, what is not, Retry-After), timeouts and deadlines, malformed
replies (never judgments, never cached), failed rows in the report, run aborts (bad key,
error budget), adaptive concurrency, request budgets and in-flight de-duplication.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import replace
from email.utils import formatdate
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
from multidict import CIMultiDict
from typer.testing import CliRunner

from ragbatch.cli._app import app
from ragbatch.core._errors import (
    EXIT_ABORTED,
    EXIT_ROW_FAILURES,
    ProviderError,
    RateLimited,
    RunAborted,
)
from ragbatch.core._provider import Call, Reply
from ragbatch.core._questions import build_request
from ragbatch.core._schema import Row
from ragbatch.data._jsonl import JsonlReader
from ragbatch.providers._jev import JevProvider, JevSettings, error_message, parse_retry_after
from ragbatch.providers._ratelimit import RateLimiter
from ragbatch.providers._replies import HttpReply
from ragbatch.providers.cache._replies import CachedProvider, ReplyCache
from ragbatch.run._job import run_job
from ragbatch.testing import Fault, JevServer, count_input_tokens
from ragbatch.testing.bucket import TokenBucket
from tests.conftest import job_config

ROOT = Path(__file__).resolve().parents[2]
DATASET = ROOT / "datasets" / "rag-fixture.jsonl"
PRICING = ROOT / "pricing" / "typesafe-2026-12.json"
MODEL = "jev-1.13.0"
KEY = "test-key"
SECRET = "sk-ragbatch-secret-5f0c2a"
ROWS: list[Row] = list(JsonlReader(DATASET))
MALFORMED = [  # JSON that fails the schema (a 200 that is not JSON is retried instead)
    Fault(kind="missing_answer"),
    Fault(kind="extra_answer"),
    Fault(kind="wrong_type"),
    Fault(kind="out_of_range"),
    Fault(kind="nan"),
    Fault(kind="bad_usage"),
    Fault(kind="bad_usage", usage_value="12"),
]

StartServer = Callable[..., JevServer]


def make_call(index: int = 0, model: str = MODEL) -> Call:
    """The request for one fixture row."""
    row = ROWS[index]
    return Call(request=build_request(row, model), row=row)


def settings_for(
    server: JevServer,
    *,
    api_key: str = KEY,
    attempt_timeout_s: float = 5.0,
    row_deadline_s: float = 10.0,
    max_retries: int = 4,
) -> JevSettings:
    """Settings with tiny backoff so retries cost milliseconds."""
    return JevSettings(
        api_key=api_key,
        base_url=server.base_url,
        model=MODEL,
        attempt_timeout_s=attempt_timeout_s,
        row_deadline_s=row_deadline_s,
        max_retries=max_retries,
        backoff_initial_s=0.01,
        backoff_max_s=0.05,
    )


@asynccontextmanager
async def open_provider(
    settings: JevSettings, limiter: RateLimiter | None = None
) -> AsyncIterator[JevProvider]:
    """A JevProvider whose connections are closed afterwards."""
    provider = JevProvider(settings, limiter or RateLimiter(4))
    try:
        yield provider
    finally:
        await provider.aclose()


def cli_args(server: JevServer, tmp_path: Path, *extra: str) -> list[str]:
    """``ragbatch run`` arguments for the fixture against ``server`` (key from the env)."""
    return [
        "run",
        str(DATASET),
        "--provider", "jev",
        "--base-url", server.base_url,
        "--model", MODEL,
        "--cache-dir", str(tmp_path / "cli-cache"),
        "--out", str(tmp_path / "cli.json"),
        "--pricing", str(PRICING),
        "--quiet",
        *extra,
    ]  # fmt: skip


def state_question(body: dict[str, Any]) -> str | None:
    """The row question inside a request body's state (None for a body that is not one)."""
    state = body.get("state")
    return state.get("question") if isinstance(state, dict) else None


# -- Retry-After ---------------------------------------------------------------------------
NOW = 1_800_000_000


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"Retry-After": "3"}, 3.0),
        ({"Retry-After": "0"}, 0.0),
        ({"Retry-After": "1.5"}, 1.5),
        ({"retry-after-ms": "250"}, 0.25),
        ({"retry-after-ms": "250", "Retry-After": "9"}, 0.25),
        ({"retry-after-ms": "soon", "Retry-After": "9"}, 9.0),
        ({"Retry-After": formatdate(NOW + 30, usegmt=True)}, 30.0),
        ({"Retry-After": formatdate(NOW - 30, usegmt=True)}, 0.0),
        ({"Retry-After": "-5"}, None),
        ({"Retry-After": "nan"}, None),
        ({"Retry-After": "next tuesday"}, None),
        ({}, None),
    ],
)
def test_parse_retry_after(headers: dict[str, str], expected: float | None) -> None:
    assert parse_retry_after(CIMultiDict(headers), now=NOW) == expected


def test_parse_retry_after_http_date_against_the_clock() -> None:
    headers = CIMultiDict({"Retry-After": formatdate(time.time() + 120, usegmt=True)})
    wait = parse_retry_after(headers)
    assert wait is not None and 115 <= wait <= 120


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b'{"error": {"message": "quota exceeded"}}', "quota exceeded"),
        (b'{"error": "bad key"}', "bad key"),
        (b'{"detail": [{"msg": "a"}, {"msg": "b"}]}', "a; b"),
        (
            b'{"detail": [{"type": "missing", "loc": ["body", "questions", "groundedness", '
            b'"noul", "criteria"], "msg": "Field required"}, {"loc": ["body"], "msg": "bad"}]}',
            "questions.groundedness.noul.criteria: Field required; bad",
        ),
        (
            b'{"detail": {"error_type": "not_found", "message": "no model jev-9"}}',
            "no model jev-9",
        ),
        (b'{"message": "quota exceeded"}', "quota exceeded"),
        (b'{"unknown": "field"}', '{"unknown": "field"}'),
        (b"<html>oops</html>", "<html>oops</html>"),
        (b"", "Internal Server Error"),
    ],
)
def test_error_message(content: bytes, expected: str) -> None:
    assert (
        error_message(HttpReply(500, "Internal Server Error", CIMultiDict(), content)) == expected
    )


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


def test_rejected_key_stops_the_job_early(jev_server: JevServer, tmp_path: Path) -> None:
    config = job_config(jev_server, tmp_path, api_key=SECRET, concurrency=4)
    with pytest.raises(RunAborted) as info:
        run_job(config)
    assert SECRET not in str(info.value)
    assert jev_server.responses_by_status == {401: jev_server.requests_total}
    assert 1 <= jev_server.requests_total <= 8  # at most a request per worker, not 48
    assert not (tmp_path / "r.json").exists()


def test_cli_exits_4_on_rejected_key_without_printing_it(
    start_jev_server: StartServer, tmp_path: Path
) -> None:
    server = start_jev_server(
        api_key=SECRET,
        fault_fn=lambda index, body: Fault(kind="status", status=403, message=f"{SECRET}?"),
    )
    args = cli_args(server, tmp_path, "--concurrency", "4")
    result = CliRunner().invoke(app, args, env={"TYPESAFE_API_KEY": SECRET})
    assert result.exit_code == EXIT_ABORTED
    assert result.stderr.startswith("error: the Jev API rejected the key (HTTP 403: ***?)")
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.output
    assert SECRET not in result.output
    assert server.requests_total <= 8


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


# -- failed rows in a whole job ------------------------------------------------------------
FAILING = {ROWS[3].question, ROWS[10].question}


def fail_chosen_rows(index: int, body: dict[str, Any]) -> Fault | None:
    """422 for the two chosen rows, every time they are asked."""
    return Fault(kind="status", status=422) if state_question(body) in FAILING else None


def test_rows_that_fail_are_failures_not_verdicts(
    start_jev_server: StartServer, tmp_path: Path
) -> None:
    server = start_jev_server(fault_fn=fail_chosen_rows)
    result = run_job(job_config(server, tmp_path))
    report = orjson.loads((tmp_path / "r.json").read_bytes())
    assert (tmp_path / "r.json").read_bytes() == result.report_bytes
    failed_ids = {ROWS[3].id, ROWS[10].id}
    for row in report["rows"]:
        if row["id"] in failed_ids:
            assert (row["status"], row["route"]) == ("failed", "failed")
            assert row["error"]["kind"] == "http-422"
            assert "diagnosis" not in row and row["cascade"]["status"] == "failed"
        else:
            assert row["status"] == "ok" and row["route"] != "failed"
    failures = report["modes"]["jevOnly"]["failures"]
    assert failures == {"count": 2, "rate": 2 / 48, "byKind": {"http-422": 2}}
    assert report["modes"]["jevOnly"]["routes"].get("failed") == 2
    assert server.requests_total == 48  # 422 is not retried

    # The CLI says so with exit code 3; the failed rows were not cached, so asked again.
    result_cli = CliRunner().invoke(app, cli_args(server, tmp_path), env={"TYPESAFE_API_KEY": KEY})
    assert result_cli.exit_code == EXIT_ROW_FAILURES
    assert server.requests_total == 48 + 48
    rerun = orjson.loads((tmp_path / "cli.json").read_bytes())
    assert rerun["modes"]["jevOnly"]["failures"]["count"] == 2


def test_error_budget_aborts_the_run(jev_server: JevServer, tmp_path: Path) -> None:
    jev_server.fault_fn = lambda index, body: Fault(kind="status", status=500)
    config = job_config(
        jev_server,
        tmp_path,
        concurrency=2,
        max_retries=0,
        max_error_rate=0.2,
        error_budget_rows=5,
    )
    with pytest.raises(RunAborted, match="over the error budget of 20%"):
        run_job(config)
    assert 5 <= jev_server.requests_total <= 8
    assert not (tmp_path / "r.json").exists()


# -- rate control --------------------------------------------------------------------------
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
