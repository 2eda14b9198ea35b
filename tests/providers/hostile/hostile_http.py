"""The client and the helpers of the hostile-server tests (test_wire_hostile.py,
test_wire_proxy_keys.py; their fixtures: conftest.py), over the raw-socket server on 127.0.0.1
of tests/providers/raw_http.py, which answers each request with what the test hands it."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragbatch.core._errors import ProviderError
from ragbatch.providers._apikey import Redactor
from ragbatch.providers._http_aiohttp import AiohttpWire
from ragbatch.providers._http_client import Policy, RetryingClient, Service
from ragbatch.providers._http_conn import ConnWire
from ragbatch.providers._ratelimit import RateLimiter
from ragbatch.providers._replies import HttpReply
from tests.providers.raw_http import Handler, RawServer, answer, reply

__all__ = [
    "KEY",
    "PROXY_VARIABLES",
    "ROOT",
    "SERVICE",
    "Handler",
    "Server",
    "answer",
    "call",
    "client",
    "failure",
    "raw",
    "reply",
]

ROOT = Path(__file__).resolve().parents[3]
KEY = "sk-Hostile-key-7f3a9c"
SERVICE = Service("the test API", "TEST_KEY", "x-request-id", "--base-url")
PROXY_VARIABLES = [f"{scheme}_proxy" for scheme in ("http", "https", "all", "no")]
PROXY_VARIABLES += [name.upper() for name in PROXY_VARIABLES]

# The raw-socket server and its handlers are the HTTP client tests' own.
Server = RawServer


def client(url: str, wire: str = "conn", **policy: object) -> RetryingClient:
    settings = Policy(
        **{"attempt_timeout_s": 5.0, "max_retries": 0, "backoff_initial_s": 0.01, **policy}  # type: ignore[arg-type]
    )
    http = RetryingClient(url, KEY, RateLimiter(64), settings, SERVICE, Redactor(KEY))
    if wire == "aiohttp" and isinstance(http.wire, ConnWire):
        http.wire = AiohttpWire(http.wire.url, settings)
        http._wire_errors = http.wire.errors
    return http


def raw(got: HttpReply) -> tuple[HttpReply, int]:
    return got, 0


async def call(http: RetryingClient) -> HttpReply:
    return (await http.call("/v1/x", b"{}", 1, raw)).value


async def failure(http: RetryingClient) -> ProviderError:
    try:
        with pytest.raises(ProviderError) as caught:
            await call(http)
    finally:
        await http.aclose()
    return caught.value
