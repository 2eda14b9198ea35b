"""Retries and timeouts against a real Jev test server on 127.0.0.1: a 200 that is not JSON is
retried, Retry-After is honoured on every retried status, --timeout bounds the whole attempt."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from ragbatch.core._errors import ProviderError
from ragbatch.core._provider import Call
from ragbatch.core._questions import build_request
from ragbatch.data._jsonl import JsonlReader
from ragbatch.providers._jev import JevProvider, JevSettings
from ragbatch.providers._ratelimit import RateLimiter
from ragbatch.run._job import run_job
from ragbatch.testing import Fault, JevServer
from tests.conftest import job_config

ROOT = Path(__file__).resolve().parents[2]
ROWS = list(JsonlReader(ROOT / "datasets" / "rag-fixture.jsonl"))
MODEL = "jev-1.13.0"


def make_call(index: int = 0) -> Call:
    return Call(request=build_request(ROWS[index], MODEL), row=ROWS[index])


@asynccontextmanager
async def open_provider(
    server: JevServer,
    *,
    attempt_timeout_s: float = 5.0,
    row_deadline_s: float = 10.0,
    max_retries: int = 4,
    retry_after_cap_s: float = 60.0,
) -> AsyncIterator[JevProvider]:
    """A provider with millisecond backoff (so only a header can explain a long wait)."""
    settings = JevSettings(
        api_key="test-key",
        base_url=server.base_url,
        model=MODEL,
        attempt_timeout_s=attempt_timeout_s,
        row_deadline_s=row_deadline_s,
        max_retries=max_retries,
        backoff_initial_s=0.01,
        backoff_max_s=0.05,
        retry_after_cap_s=retry_after_cap_s,
    )
    provider = JevProvider(settings, RateLimiter(4))
    try:
        yield provider
    finally:
        await provider.aclose()


# -- a 200 that is not JSON ----------------------------------------------------------------
@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["non_json", "truncated"])
async def test_a_200_that_is_not_json_is_retried(jev_server: JevServer, kind: str) -> None:
    jev_server.push(Fault(kind=kind))  # type: ignore[arg-type]
    async with open_provider(jev_server) as provider:
        reply = await provider.fetch_answers(make_call())
    assert (reply.attempts, reply.retries) == (2, {"non-json-response": 1})
    assert set(reply.answers) == set(make_call().request.questions)
    assert jev_server.responses_by_status == {200: 2} and jev_server.successful == 1


@pytest.mark.anyio
async def test_a_200_that_is_never_json_fails_after_the_retries(jev_server: JevServer) -> None:
    jev_server.fault_fn = lambda index, body: Fault(kind="non_json")
    async with open_provider(jev_server, max_retries=2) as provider:
        with pytest.raises(ProviderError) as info:
            await provider.fetch_answers(make_call())
    error = info.value
    assert (error.kind, error.retryable, error.retries) == (
        "non-json-response", True, {"non-json-response": 2}
    )  # fmt: skip
    assert str(error) == (
        "HTTP 200 with a body that is not JSON (text/html, 17 bytes: <html>oops</html>) "
        "(request id req-3)"
    )
    assert jev_server.requests_total == 3


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["missing_answer", "nan", "wrong_type"])
async def test_json_that_fails_the_schema_is_still_not_retried(
    jev_server: JevServer, kind: str
) -> None:
    jev_server.push(Fault(kind=kind))  # type: ignore[arg-type]
    async with open_provider(jev_server) as provider:
        with pytest.raises(ProviderError) as info:
            await provider.fetch_answers(make_call())
    assert (info.value.kind, info.value.retryable) == ("malformed-response", False)
    assert jev_server.requests_total == 1


def test_a_job_recovers_from_proxy_pages(jev_server: JevServer, tmp_path: Path) -> None:
    jev_server.fault_fn = lambda index, body: Fault(kind="non_json") if index < 12 else None
    result = run_job(job_config(jev_server, tmp_path, concurrency=4, backoff_initial_s=0.01))
    assert result.report.modes.jev_only.failures.count == 0
    assert jev_server.successful == 48 and jev_server.requests_total == 48 + 12
    assert result.record["retriesByStatus"] == {"non-json-response": 12}


# -- Retry-After on every retried status ---------------------------------------------------
@pytest.mark.anyio
@pytest.mark.parametrize(
    ("fault", "wait_s"),
    [
        (Fault(kind="status", status=503, retry_after="0.4"), 0.4),
        (Fault(kind="status", status=500, retry_after_ms=400), 0.4),
        (Fault(kind="status", status=502, retry_after_ms=300, retry_after="9"), 0.3),
        (Fault(kind="status", status=408, retry_after="0.3"), 0.3),
        (Fault(kind="status", status=529, retry_after="0.3"), 0.3),  # as before
    ],
    ids=["503-seconds", "500-ms", "502-ms-wins", "408", "529"],
)
async def test_retry_after_is_honoured_on_every_retried_status(
    jev_server: JevServer, fault: Fault, wait_s: float
) -> None:
    jev_server.push(fault)
    async with open_provider(jev_server) as provider:
        started = time.perf_counter()
        reply = await provider.fetch_answers(make_call())
        elapsed = time.perf_counter() - started
    assert (reply.attempts, reply.retries) == (2, {str(fault.status): 1})
    # the backoff is at most 0.05 s here: only the header explains the wait (a lower bound:
    # a loaded machine only makes it longer); retry-after-ms wins over a 9 s Retry-After
    assert wait_s <= elapsed
    assert fault.retry_after != "9" or elapsed < 9


@pytest.mark.anyio
async def test_a_long_retry_after_is_capped(jev_server: JevServer) -> None:
    jev_server.push(Fault(kind="status", status=503, retry_after="3600"))
    async with open_provider(jev_server, retry_after_cap_s=0.3) as provider:
        started = time.perf_counter()
        reply = await provider.fetch_answers(make_call())
        elapsed = time.perf_counter() - started
    assert reply.attempts == 2 and 0.3 <= elapsed < 3600  # the cap, not the hour asked for


@pytest.mark.anyio
async def test_a_request_error_is_not_retried_whatever_its_retry_after(
    jev_server: JevServer,
) -> None:
    jev_server.push(Fault(kind="status", status=400, retry_after="0.2"))
    async with open_provider(jev_server) as provider:
        with pytest.raises(ProviderError) as info:
            await provider.fetch_answers(make_call())
    assert (info.value.kind, info.value.retry_after) == ("http-400", None)
    assert jev_server.requests_total == 1


# -- --timeout bounds the whole attempt ----------------------------------------------------
@pytest.mark.anyio
async def test_a_reply_trickling_in_fails_the_attempt_at_the_timeout(
    jev_server: JevServer,
) -> None:
    # one byte every 0.5 s: each read is quick, the whole reply would take minutes
    jev_server.fault_fn = lambda index, body: Fault(kind="trickle", delay_s=0.5)
    async with open_provider(
        jev_server, attempt_timeout_s=1.0, row_deadline_s=20.0, max_retries=0
    ) as provider:
        started = time.perf_counter()
        with pytest.raises(ProviderError) as info:
            await provider.fetch_answers(make_call())
        elapsed = time.perf_counter() - started
    assert (info.value.kind, info.value.retryable) == ("timeout", True)
    assert str(info.value) == "no complete reply within 1.0 s"  # not the 20 s row deadline
    assert elapsed >= 1.0
    assert jev_server.requests_total == 1


@pytest.mark.anyio
async def test_a_trickled_attempt_is_retried(jev_server: JevServer) -> None:
    jev_server.push(Fault(kind="trickle", delay_s=0.2))
    async with open_provider(jev_server, attempt_timeout_s=0.5) as provider:
        started = time.perf_counter()
        reply = await provider.fetch_answers(make_call())
        elapsed = time.perf_counter() - started
    assert (reply.attempts, reply.retries) == (2, {"timeout": 1})
    assert elapsed >= 0.5


def test_trickling_rows_fail_at_the_timeout_in_a_job(jev_server: JevServer, tmp_path: Path) -> None:
    slow = {ROWS[2].question, ROWS[7].question}

    def trickle_some(index: int, body: dict[str, object]) -> Fault | None:
        state = body.get("state")
        question = state.get("question") if isinstance(state, dict) else None
        return Fault(kind="trickle", delay_s=0.25) if question in slow else None

    jev_server.fault_fn = trickle_some
    config = job_config(jev_server, tmp_path, timeout=0.5, row_deadline=20.0, max_retries=1)
    result = run_job(config)
    failures = result.report.modes.jev_only.failures
    # each attempt timed out at 0.5 s: the 20 s row deadline would say deadline-exceeded
    assert (failures.count, failures.by_kind) == (2, {"timeout": 2})
