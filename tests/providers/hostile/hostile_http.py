"""The raw-socket server, the client and the helpers of the hostile-server tests
(test_wire_hostile.py, test_wire_proxy_keys.py; their fixtures: conftest.py): a server on 127.0.0.1 that answers each
request with what the test hands it."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from ragbatch.core._errors import ProviderError
from ragbatch.providers._apikey import Redactor
from ragbatch.providers._http_aiohttp import AiohttpWire
from ragbatch.providers._http_client import Policy, RetryingClient, Service
from ragbatch.providers._http_conn import ConnWire
from ragbatch.providers._ratelimit import RateLimiter
from ragbatch.providers._replies import HttpReply

ROOT = Path(__file__).resolve().parents[3]
KEY = "sk-Hostile-key-7f3a9c"
SERVICE = Service("the test API", "TEST_KEY", "x-request-id", "--base-url")
PROXY_VARIABLES = [f"{scheme}_proxy" for scheme in ("http", "https", "all", "no")]
PROXY_VARIABLES += [name.upper() for name in PROXY_VARIABLES]

# Answers the connection, given the request's head and body; False: close it.
Handler = Callable[[socket.socket, bytes, bytes], bool]


def reply(body: bytes = b"{}", extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n%s\r\n%s" % (len(body), extra, body)


class Server:
    """Reads each request (Content-Length framed) and lets ``handler`` answer on the socket."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.accepted = 0
        self.requests: list[bytes] = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.accepted += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        buffer = b""
        with conn:
            try:
                while True:
                    while b"\r\n\r\n" not in buffer:
                        data = conn.recv(65536)
                        if not data:
                            return
                        buffer += data
                    head, buffer = buffer.split(b"\r\n\r\n", 1)
                    length = 0
                    for line in head.split(b"\r\n")[1:]:
                        name, _, value = line.partition(b":")
                        if name.strip().lower() == b"content-length":
                            length = int(value)
                    while len(buffer) < length:
                        buffer += conn.recv(65536)
                    body, buffer = buffer[:length], buffer[length:]
                    self.requests.append(head)
                    if not self.handler(conn, head, body):
                        return
            except OSError:  # the client went away mid-answer
                return


def answer(data: bytes) -> Handler:
    def handler(conn: socket.socket, head: bytes, body: bytes) -> bool:
        conn.sendall(data)
        return True

    return handler


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
