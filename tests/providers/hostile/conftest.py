"""The hostile-server tests' fixtures: a raw-socket server started per test, and an
environment without proxy variables."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tests.providers.hostile.hostile_http import PROXY_VARIABLES, Handler, Server


@pytest.fixture
def serve() -> Iterator[Callable[[Handler], Server]]:
    servers: list[Server] = []

    def start(handler: Handler) -> Server:
        servers.append(Server(handler))
        return servers[-1]

    yield start
    for server in servers:
        server.listener.close()


@pytest.fixture
def no_proxy_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in [*PROXY_VARIABLES, "REQUEST_METHOD"]:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch
