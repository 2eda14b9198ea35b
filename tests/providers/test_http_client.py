"""The one HTTP client (aiohttp underneath) against a raw-socket HTTP/1.1 server on 127.0.0.1:
framing edge cases, the mapping of failures to the project's kinds, the body cap, proxies."""

from __future__ import annotations

import gzip
import shutil
import socket
import ssl
import subprocess
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragbatch.cli._app import app
from ragbatch.core._errors import EXIT_ROW_FAILURES, ProviderError
from ragbatch.providers._apikey import Redactor
from ragbatch.providers._http_client import RESPONSE_TOO_LARGE_KIND, Policy, RetryingClient, Service
from ragbatch.providers._http_wire import canonical_url, proxy_for
from ragbatch.providers._ratelimit import RateLimiter
from ragbatch.providers._replies import HttpReply
from ragbatch.providers.cache._replies import ReplyCache

ROOT = Path(__file__).resolve().parents[2]
KEY = "sk-test-key-7f3a"
SERVICE = Service("the test API", "TEST_KEY", "x-request-id")
MiB = 1024 * 1024

# Given the connection, the request head and body: answer (sendall) and say whether to go on
# reading requests on this connection.
Handler = Callable[[socket.socket, bytes, bytes], bool]


def reply(body: bytes = b"{}", extra: bytes = b"", status: bytes = b"200 OK") -> bytes:
    head = b"HTTP/1.1 %s\r\ncontent-length: %d\r\n%s\r\n" % (status, len(body), extra)
    return head + body


def chunked(*parts: bytes) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts) + b"0\r\n\r\n"


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


@pytest.fixture
def serve() -> Iterator[Callable[[Handler], RawServer]]:
    servers: list[RawServer] = []

    def start(handler: Handler) -> RawServer:
        servers.append(RawServer(handler))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def client(url: str, **policy: float | str) -> RetryingClient:
    settings = Policy(**{"attempt_timeout_s": 5.0, "max_retries": 0, **policy})  # type: ignore[arg-type]
    return RetryingClient(url, KEY, RateLimiter(8), settings, SERVICE, Redactor(KEY))


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


def answer(data: bytes) -> Handler:
    def handler(conn: socket.socket, head: bytes, body: bytes) -> bool:
        conn.sendall(data)
        return True

    return handler


# --- framing -------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_gzip_then_chunked_transfer_encoding_is_decoded(
    serve: Callable[[Handler], RawServer],
) -> None:
    data = gzip.compress(b'{"ok": true}')
    head = b"HTTP/1.1 200 OK\r\ntransfer-encoding: gzip, chunked\r\n\r\n"
    server = serve(answer(head + chunked(data[:10], data[10:])))
    got = await post(client(server.url))
    assert got.body == b'{"ok": true}'


@pytest.mark.anyio
async def test_duplicate_content_length_is_an_error(
    serve: Callable[[Handler], RawServer],
) -> None:
    head = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-length: 12\r\n\r\n"
    server = serve(answer(head + b'{"ok": true}'))
    error = await failure(client(server.url))
    assert error.kind == "connection" and error.retryable


@pytest.mark.anyio
async def test_stray_bytes_on_a_pooled_connection_never_answer_the_next_call(
    serve: Callable[[Handler], RawServer],
) -> None:
    calls = []

    def handler(conn: socket.socket, head: bytes, body: bytes) -> bool:
        calls.append(body)
        # the reply to this request, then a second, unasked-for one on the same connection
        conn.sendall(reply(b'{"n": %d}' % len(calls)) + reply(b'{"stray": true}'))
        return True

    server = serve(handler)
    http = client(server.url)
    try:
        first = (await http.call("/v1/x", b"{}", 1, raw)).value
        time.sleep(0.2)  # the stray reply is in the socket's buffer now
        second = (await http.call("/v1/x", b"{}", 1, raw)).value
    finally:
        await http.aclose()
    assert (first.body, second.body) == (b'{"n": 1}', b'{"n": 2}')


# --- failure kinds -------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_dropped_connection_is_a_connection_error_not_a_timeout(
    serve: Callable[[Handler], RawServer],
) -> None:
    server = serve(lambda conn, head, body: False)  # reads the request, closes, says nothing
    started = time.perf_counter()
    error = await failure(client(server.url, attempt_timeout_s=30))
    assert error.kind == "connection" and error.retryable
    assert time.perf_counter() - started < 10
    assert KEY not in str(error)


@pytest.mark.anyio
async def test_a_cut_body_is_a_connection_error(serve: Callable[[Handler], RawServer]) -> None:
    def handler(conn: socket.socket, head: bytes, body: bytes) -> bool:
        conn.sendall(b'HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n{"half')
        return False

    error = await failure(client(serve(handler).url))
    assert error.kind == "connection"


@pytest.mark.anyio
async def test_a_refused_connection_is_a_connection_error() -> None:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]
    error = await failure(client(f"http://127.0.0.1:{port}"))
    assert error.kind == "connection"


@pytest.mark.anyio
async def test_a_silent_server_is_a_timeout(serve: Callable[[Handler], RawServer]) -> None:
    def handler(conn: socket.socket, head: bytes, body: bytes) -> bool:
        time.sleep(2)
        return False

    error = await failure(client(serve(handler).url, attempt_timeout_s=0.3))
    assert error.kind == "timeout" and error.retryable


# --- the body cap --------------------------------------------------------------------------


def gzip_bomb(inflated: int) -> bytes:
    """A gzip stream of ``inflated`` zero bytes (about 1,000 times smaller)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = bytes(MiB)
    parts = [packer.compress(block) for _ in range(inflated // MiB)]
    return b"".join(parts) + packer.flush()


@pytest.mark.anyio
async def test_a_decompression_bomb_fails_as_response_too_large(
    serve: Callable[[Handler], RawServer],
) -> None:
    bomb = gzip_bomb(256 * MiB)  # ~250 KB on the wire
    extra = b"content-encoding: gzip\r\ncontent-type: application/json\r\n"
    server = serve(answer(reply(bomb, extra)))
    started = time.perf_counter()
    error = await failure(client(server.url, max_response_bytes=MiB))
    assert error.kind == RESPONSE_TOO_LARGE_KIND and not error.retryable
    assert "1048576-byte cap" in str(error)
    assert time.perf_counter() - started < 5  # stopped at the cap, not after 256 MiB


@pytest.mark.anyio
async def test_a_huge_content_length_fails_before_reading(
    serve: Callable[[Handler], RawServer],
) -> None:
    def handler(conn: socket.socket, head: bytes, body: bytes) -> bool:
        conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 2000000000\r\n\r\n" + bytes(65536))
        time.sleep(1)
        return False

    error = await failure(client(serve(handler).url))
    assert error.kind == RESPONSE_TOO_LARGE_KIND
    assert "Content-Length 2000000000" in str(error)


@pytest.mark.anyio
async def test_an_endless_chunked_body_is_capped(serve: Callable[[Handler], RawServer]) -> None:
    def handler(conn: socket.socket, head: bytes, body: bytes) -> bool:
        conn.sendall(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
        piece = b"%x\r\n%s\r\n" % (65536, bytes(65536))
        while True:  # until the client hangs up
            conn.sendall(piece)

    error = await failure(client(serve(handler).url, max_response_bytes=4 * MiB))
    assert error.kind == RESPONSE_TOO_LARGE_KIND


@pytest.mark.anyio
async def test_a_body_at_the_cap_is_accepted(serve: Callable[[Handler], RawServer]) -> None:
    body = gzip.compress(b"x" * MiB)
    server = serve(answer(reply(body, b"content-encoding: gzip\r\n")))
    got = await post(client(server.url, max_response_bytes=MiB))
    assert got.body == b"x" * MiB


# --- proxies and URLs ----------------------------------------------------------------------


@pytest.mark.anyio
async def test_the_environment_s_proxy_is_used_and_no_proxy_bypasses_it(
    serve: Callable[[Handler], RawServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    origin = serve(answer(reply(b'{"from": "origin"}')))
    proxy = serve(answer(reply(b'{"from": "proxy"}')))
    # a name the proxy resolves, not this machine: a direct call could not reach it
    target = f"http://service.invalid:{origin.port}"
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    assert proxy_for(target) == proxy.url
    got = await post(client(target))
    assert got.body == b'{"from": "proxy"}'
    assert proxy.requests[0].startswith(b"POST http://service.invalid:%d/v1/x " % origin.port)
    assert b"authorization: bearer " + KEY.lower().encode() in proxy.requests[0].lower()

    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    assert proxy_for(origin.url) is None
    got = await post(client(origin.url))
    assert got.body == b'{"from": "origin"}' and len(proxy.requests) == 1


def test_legacy_ipv4_spellings_are_written_the_usual_way() -> None:
    assert canonical_url("http://2130706433:8080/v1") == "http://127.0.0.1:8080/v1"
    assert canonical_url("http://127.1") == "http://127.0.0.1"
    assert canonical_url("https://api.typesafe.ai") == "https://api.typesafe.ai"
    assert canonical_url("http://[::1]:9") == "http://[::1]:9"


def test_a_run_against_a_bomb_fails_its_rows_and_caches_nothing(
    serve: Callable[[Handler], RawServer], tmp_path: Path
) -> None:
    bomb = reply(
        gzip_bomb(64 * MiB), b"content-encoding: gzip\r\ncontent-type: application/json\r\n"
    )
    server = serve(answer(bomb))
    args = [
        "run", str(ROOT / "datasets" / "rag-fixture.jsonl"), "--provider", "jev",
        "--base-url", server.url, "--model", "jev-1.13.0",
        "--cache-dir", str(tmp_path / "cache"), "--out", str(tmp_path / "report.json"),
        "--pricing", str(ROOT / "pricing" / "typesafe-2026-12.json"),
        "--max-response-bytes", str(MiB), "--concurrency", "4",
    ]  # fmt: skip
    result = CliRunner().invoke(app, args, env={"TYPESAFE_API_KEY": KEY})
    output = result.stdout + result.stderr
    assert result.exit_code == EXIT_ROW_FAILURES, output
    assert "response-too-large: 48 rows" in output and "1048576-byte cap" in output
    assert len(server.requests) == 48  # not retried
    assert len(ReplyCache(tmp_path / "cache", read_only=True)) == 0


@pytest.fixture
def tls_server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A TLS loopback server with a self-signed certificate for 127.0.0.1; its URL and the
    certificate (the CA bundle that trusts it)."""
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key),
         "-out", str(cert), "-days", "2", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def accept() -> None:
        while True:
            try:
                conn, _ = listener.accept()
                with context.wrap_socket(conn, server_side=True) as tls:
                    tls.recv(65536)
                    tls.sendall(reply(b'{"tls": true}', b"connection: close\r\n"))
            except (OSError, ssl.SSLError):
                if listener.fileno() < 0:
                    return

    threading.Thread(target=accept, daemon=True).start()
    yield f"https://127.0.0.1:{port}", cert
    listener.close()


@pytest.mark.anyio
async def test_tls_is_verified_unless_told_otherwise(tls_server: tuple[str, Path]) -> None:
    url, cert = tls_server
    error = await failure(client(url))  # the system's CAs do not trust it
    assert error.kind == "connection" and "certificate" in str(error).lower()
    trusted = client(url, verify=str(cert))
    assert (await post(trusted)).body == b'{"tls": true}'
    unchecked = client(url, verify=False)
    assert (await post(unchecked)).body == b'{"tls": true}'
