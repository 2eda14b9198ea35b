"""Shared fixtures: real Jev test servers on 127.0.0.1 (started per test, always stopped)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ragbatch.testing import JevServer

ROOT = Path(__file__).resolve().parent.parent
JEV_KEY = "test-key"


@pytest.fixture
def anyio_backend() -> str:
    """Async tests run on asyncio (tenacity and the provider are only used there)."""
    return "asyncio"


@pytest.fixture
def jev_server() -> Iterator[JevServer]:
    """A fresh Jev server on a random loopback port with key ``test-key``."""
    with JevServer(api_key=JEV_KEY) as server:
        yield server


@pytest.fixture
def start_jev_server() -> Iterator[Callable[..., JevServer]]:
    """Start servers with custom options (latency, token bucket, ...); all stopped at the end."""
    started: list[JevServer] = []

    def start(**options: Any) -> JevServer:
        server = JevServer(**{"api_key": JEV_KEY, **options}).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()
