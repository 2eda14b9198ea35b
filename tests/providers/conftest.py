"""Fixtures of the provider tests: the raw HTTP server (tests/providers/raw_http.py) and
each wire under the client."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tests.providers.raw_http import WIRE, WIRES, Handler, RawServer


@pytest.fixture
def serve() -> Iterator[Callable[[Handler], RawServer]]:
    servers: list[RawServer] = []

    def start(handler: Handler) -> RawServer:
        servers.append(RawServer(handler))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


@pytest.fixture(params=list(WIRES))
def each_wire(request: pytest.FixtureRequest) -> Iterator[str]:
    """A test that uses it runs over each wire (the others: over the one a URL gets)."""
    WIRE[0] = request.param
    yield request.param
    WIRE[0] = "conn"
