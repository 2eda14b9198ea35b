"""A raw-socket HTTP/1.1 server on 127.0.0.1 and the one HTTP client over it, for the
tests/providers/test_http_*.py files (their fixtures, serve and each_wire: conftest.py).
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import ssl
import subprocess
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

KEY = "sk-test-key-7f3a"
SERVICE = Service("the test API", "TEST_KEY", "x-request-id")

# Given the connection, the request head and body: answer (sendall) and say whether to go on
# reading requests on this connection.
Handler = Callable[[socket.socket, bytes, bytes], bool]


def reply(body: bytes = b"{}", extra: bytes = b"", status: bytes = b"200 OK") -> bytes:
    head = b"HTTP/1.1 %s\r\ncontent-length: %d\r\n%s\r\n" % (status, len(body), extra)
    return head + body


class RawServer:
    """Reads each request (Content-Length framed) and lets ``handler`` answer on the socket."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.accepted = 0
        self.requests: list[bytes] = []  # request heads
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
            except OSError:  # the client went away mid-answer (a capped body, a timeout)
                return

    def close(self) -> None:
        self.listener.close()


WIRES = {"conn": ConnWire, "aiohttp": AiohttpWire}
WIRE = ["conn"]  # the wire client() puts under the client: set by each_wire (conftest.py)


def client(url: str, **policy: float | str) -> RetryingClient:
    settings = Policy(**{"attempt_timeout_s": 5.0, "max_retries": 0, **policy})  # type: ignore[arg-type]
    http = RetryingClient(url, KEY, RateLimiter(8), settings, SERVICE, Redactor(KEY))
    if not isinstance(http.wire, WIRES[WIRE[0]]) and isinstance(http.wire, ConnWire):
        http.wire = WIRES[WIRE[0]](http.wire.url, settings)
        http._wire_errors = http.wire.errors
    return http


def raw(reply: HttpReply) -> tuple[HttpReply, int]:
    return reply, 0


async def post(http: RetryingClient, body: bytes = b"{}") -> HttpReply:
    try:
        return (await http.call("/v1/x", body, 1, raw)).value
    finally:
        await http.aclose()


async def failure(http: RetryingClient) -> ProviderError:
    with pytest.raises(ProviderError) as caught:
        await post(http)
    return caught.value


def hang_up(conn: socket.socket) -> None:
    """Wait, sending nothing, until the client closes the connection (10 s at most)."""
    conn.settimeout(10)
    with contextlib.suppress(OSError):
        while conn.recv(65536):
            pass


def answer(data: bytes) -> Handler:
    def handler(conn: socket.socket, head: bytes, body: bytes) -> bool:
        conn.sendall(data)
        return True

    return handler


def tls_context(folder: Path) -> tuple[Path, ssl.SSLContext]:
    """A self-signed certificate for 127.0.0.1 written into ``folder`` (the CA bundle that
    trusts it) and a server context holding it; the test is skipped without openssl."""
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key),
         "-out", str(cert), "-days", "2", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    return cert, context
