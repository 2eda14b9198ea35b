"""Calls of the rag fixture's rows and JevProviders with millisecond backoff, for the
tests/providers/test_jev_*.py files (and tests/run/test_progress_holds.py).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

from ragbatch.core._provider import Call
from ragbatch.core._questions import build_request
from ragbatch.core._schema import Row
from ragbatch.data._jsonl import JsonlReader
from ragbatch.providers._jev import JevProvider, JevSettings
from ragbatch.providers._ratelimit import RateLimiter
from ragbatch.testing import JevServer

ROOT = Path(__file__).resolve().parents[2]
DATASET = ROOT / "datasets" / "rag-fixture.jsonl"
MODEL = "jev-1.13.0"
KEY = "test-key"
SECRET = "sk-ragbatch-secret-5f0c2a"
ROWS: list[Row] = list(JsonlReader(DATASET))

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
