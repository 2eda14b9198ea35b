"""The one HTTP client against a raw-socket HTTP/1.1 server on 127.0.0.1: framing edge cases,
the mapping of failures to the project's kinds, the body cap, proxies, TLS — over both wires
(the project's own connections, and aiohttp's session that a proxy gets)."""

from __future__ import annotations

import contextlib
import functools
import gzip
import shutil
import socket
import ssl
import struct
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
from ragbatch.providers._http_aiohttp import AiohttpWire
from ragbatch.providers._http_client import RESPONSE_TOO_LARGE_KIND, Policy, RetryingClient, Service
from ragbatch.providers._http_conn import ConnWire
from ragbatch.providers._http_wire import canonical_url, open_wire, proxy_for
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


WIRES = {"conn": ConnWire, "aiohttp": AiohttpWire}
WIRE = ["conn"]  # the wire client() puts under the client: set by the fixture below


@pytest.fixture(params=list(WIRES))
def each_wire(request: pytest.FixtureRequest) -> Iterator[str]:
    """A test that uses it runs over each wire (the others: over the one a URL gets)."""
    WIRE[0] = request.param
    yield request.param
    WIRE[0] = "conn"


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


# --- framing -------------------------------------------------------------------------------


@pytest.mark.usefixtures("each_wire")
@pytest.mark.anyio
async def test_gzip_then_chunked_transfer_encoding_is_decoded(
    serve: Callable[[Handler], RawServer],
) -> None:
    data = gzip.compress(b'{"ok": true}')
    head = b"HTTP/1.1 200 OK\r\ntransfer-encoding: gzip, chunked\r\n\r\n"
    server = serve(answer(head + chunked(data[:10], data[10:])))
    got = await post(client(server.url))
    assert got.body == b'{"ok": true}'


@pytest.mark.usefixtures("each_wire")
@pytest.mark.anyio
async def test_duplicate_content_length_is_an_error(
    serve: Callable[[Handler], RawServer],
) -> None:
    head = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-length: 12\r\n\r\n"
    server = serve(answer(head + b'{"ok": true}'))
    error = await failure(client(server.url))
    assert error.kind == "connection" and error.retryable


@pytest.mark.usefixtures("each_wire")
@pytest.mark.anyio
async def test_stray_bytes_on_a_pooled_connection_never_answer_the_next_call(
    serve: Callable[[Handler], RawServer],
) -> None:
    calls = []
    sent = threading.Event()

    def handler(conn: socket.socket, head: bytes, body: bytes) -> bool:
        calls.append(body)
        # the reply to this request, then a second, unasked-for one on the same connection
        conn.sendall(reply(b'{"n": %d}' % len(calls)) + reply(b'{"stray": true}'))
        sent.set()
        return True

    server = serve(handler)
    http = client(server.url)
    try:
        first = (await http.call("/v1/x", b"{}", 1, raw)).value
        assert sent.wait(5)  # sent on loopback: the stray reply is in the socket's buffer now
        second = (await http.call("/v1/x", b"{}", 1, raw)).value
    finally:
        await http.aclose()
    assert (first.body, second.body) == (b'{"n": 1}', b'{"n": 2}')


# --- failure kinds -------------------------------------------------------------------------


@pytest.mark.usefixtures("each_wire")
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


@pytest.mark.usefixtures("each_wire")
@pytest.mark.anyio
async def test_a_cut_body_is_a_connection_error(serve: Callable[[Handler], RawServer]) -> None:
    def handler(conn: socket.socket, head: bytes, body: bytes) -> bool:
        conn.sendall(b'HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n{"half')
        return False

    error = await failure(client(serve(handler).url))
    assert error.kind == "connection"


@pytest.mark.usefixtures("each_wire")
@pytest.mark.anyio
async def test_a_refused_connection_is_a_connection_error() -> None:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]
    error = await failure(client(f"http://127.0.0.1:{port}"))
    assert error.kind == "connection"


@pytest.mark.usefixtures("each_wire")
@pytest.mark.anyio
async def test_a_silent_server_is_a_timeout(serve: Callable[[Handler], RawServer]) -> None:
    def handler(conn: socket.socket, head: bytes, body: bytes) -> bool:
        hang_up(conn)  # says nothing until the client gives up
        return False

    error = await failure(client(serve(handler).url, attempt_timeout_s=0.3))
    assert error.kind == "timeout" and error.retryable


# --- the body cap --------------------------------------------------------------------------


@functools.cache
def gzip_bomb(inflated: int) -> bytes:
    """A gzip stream of ``inflated`` zero bytes (about 1,000 times smaller).

    Each MiB is compressed after a full flush, which resets the compressor, so every MiB
    compresses to the same bytes: one is compressed and repeated (deflating 256 MiB takes
    seconds), then the gzip header and trailer (CRC-32 and length) are written around them.
    """
    block = bytes(MiB)
    packer = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    piece = packer.compress(block) + packer.flush(zlib.Z_FULL_FLUSH)
    assert packer.compress(block) + packer.flush(zlib.Z_FULL_FLUSH) == piece
    crc = functools.reduce(lambda crc, _: zlib.crc32(block, crc), range(inflated // MiB), 0)
    head = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"  # gzip, deflate, no name or time
    trailer = struct.pack("<II", crc, inflated & 0xFFFFFFFF)
    return head + piece * (inflated // MiB) + packer.flush() + trailer


def test_the_bomb_is_a_gzip_stream_of_zeros() -> None:
    assert gzip.decompress(gzip_bomb(4 * MiB)) == bytes(4 * MiB)


@pytest.mark.usefixtures("each_wire")
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


@pytest.mark.usefixtures("each_wire")
@pytest.mark.anyio
async def test_a_huge_content_length_fails_before_reading(
    serve: Callable[[Handler], RawServer],
) -> None:
    def handler(conn: socket.socket, head: bytes, body: bytes) -> bool:
        conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 2000000000\r\n\r\n" + bytes(65536))
        hang_up(conn)  # the rest never comes: the client must stop at the head
        return False

    error = await failure(client(serve(handler).url))
    assert error.kind == RESPONSE_TOO_LARGE_KIND
    assert "Content-Length 2000000000" in str(error)


@pytest.mark.usefixtures("each_wire")
@pytest.mark.anyio
async def test_an_endless_chunked_body_is_capped(serve: Callable[[Handler], RawServer]) -> None:
    def handler(conn: socket.socket, head: bytes, body: bytes) -> bool:
        conn.sendall(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
        piece = b"%x\r\n%s\r\n" % (65536, bytes(65536))
        while True:  # until the client hangs up
            conn.sendall(piece)

    error = await failure(client(serve(handler).url, max_response_bytes=4 * MiB))
    assert error.kind == RESPONSE_TOO_LARGE_KIND


@pytest.mark.usefixtures("each_wire")
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


@pytest.mark.usefixtures("each_wire")
@pytest.mark.anyio
async def test_tls_is_verified_unless_told_otherwise(tls_server: tuple[str, Path]) -> None:
    url, cert = tls_server
    error = await failure(client(url))  # the system's CAs do not trust it
    assert error.kind == "connection" and "certificate" in str(error).lower()
    trusted = client(url, verify=str(cert))
    assert (await post(trusted)).body == b'{"tls": true}'
    unchecked = client(url, verify=False)
    assert (await post(unchecked)).body == b'{"tls": true}'


# --- the project's own connections: framing llhttp does, the pool, the head ----------------


def deflate_raw(data: bytes) -> bytes:
    packer = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    return packer.compress(data) + packer.flush()


@pytest.mark.anyio
@pytest.mark.usefixtures("each_wire")
@pytest.mark.parametrize(
    "framed",
    [
        pytest.param(b"HTTP/1.1 100 Continue\r\n\r\n" + reply(b'{"ok": 1}'), id="100-continue"),
        pytest.param(
            b"HTTP/1.1 103 Early Hints\r\nlink: </a>\r\n\r\n" + reply(b'{"ok": 1}'), id="103"
        ),
        pytest.param(
            b"HTTP/1.1 200 OK\r\ncontent-encoding: deflate\r\ncontent-length: %d\r\n\r\n%s"
            % (len(zlib.compress(b'{"ok": 1}')), zlib.compress(b'{"ok": 1}')),
            id="deflate-zlib",
        ),
        pytest.param(
            b"HTTP/1.1 200 OK\r\ncontent-encoding: deflate\r\ncontent-length: %d\r\n\r\n%s"
            % (len(deflate_raw(b'{"ok": 1}')), deflate_raw(b'{"ok": 1}')),
            id="deflate-raw",
        ),
        pytest.param(
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
            + chunked(b'{"ok"', b": 1}")
            + b"",
            id="chunked",
        ),
        pytest.param(
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
            b'5;name=value\r\n{"ok"\r\n4\r\n: 1}\r\n0\r\nx-trailer: 1\r\n\r\n',
            id="chunk-extension-and-trailer",
        ),
    ],
)
async def test_framings_a_server_may_use_are_read(
    serve: Callable[[Handler], RawServer], framed: bytes
) -> None:
    server = serve(answer(framed))
    http = client(server.url)
    try:
        for _ in range(2):  # and the connection serves the next call
            assert (await http.call("/v1/x", b"{}", 1, raw)).value.body == b'{"ok": 1}'
    finally:
        await http.aclose()


@pytest.mark.anyio
@pytest.mark.usefixtures("each_wire")
async def test_a_body_read_to_the_close_is_complete_and_the_connection_not_reused(
    serve: Callable[[Handler], RawServer],
) -> None:
    def handler(conn: socket.socket, head: bytes, body: bytes) -> bool:
        conn.sendall(b'HTTP/1.0 200 OK\r\ncontent-type: application/json\r\n\r\n{"ok": 1}')
        return False  # closes: the body ends here

    server = serve(handler)
    http = client(server.url)
    try:
        for _ in range(2):
            assert (await http.call("/v1/x", b"{}", 1, raw)).value.body == b'{"ok": 1}'
    finally:
        await http.aclose()
    assert server.accepted == 2


@pytest.mark.anyio
@pytest.mark.usefixtures("each_wire")
@pytest.mark.parametrize("closes", [False, True], ids=["keep-alive", "connection-close"])
async def test_a_connection_is_reused_unless_the_server_closes_it(
    serve: Callable[[Handler], RawServer], closes: bool
) -> None:
    extra = b"connection: close\r\n" if closes else b""

    def handler(conn: socket.socket, head: bytes, body: bytes) -> bool:
        conn.sendall(reply(b"{}", extra))
        return not closes

    server = serve(handler)
    http = client(server.url)
    try:
        for _ in range(3):
            assert (await http.call("/v1/x", b"{}", 1, raw)).value.status == 200
    finally:
        await http.aclose()
    assert server.accepted == (3 if closes else 1)


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("framed", "message"),
    [
        pytest.param(
            reply(gzip.compress(b'{"ok": 1}')[:-12], b"content-encoding: gzip\r\n"),
            "compressed body ends early",
            id="cut-gzip",
        ),
        pytest.param(
            reply(b"{}", b"content-encoding: br\r\n"), "unsupported Content-Encoding", id="br"
        ),
        pytest.param(
            b"HTTP/1.1 200 OK\r\n" + b"x-pad: %s\r\n" % (b"a" * 70000) + b"\r\n",
            "head passed 65536 bytes",
            id="huge-head",
        ),
        pytest.param(b"HTTP/1.1 2OO OK\r\n\r\n", "breaks HTTP", id="bad-status"),
        pytest.param(
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n",
            "breaks HTTP",
            id="bad-chunk",
        ),
        pytest.param(
            b"HTTP/1.1 101 Switching Protocols\r\nconnection: upgrade\r\nupgrade: x\r\n\r\n",
            "switched protocols",
            id="upgrade",
        ),
    ],
)
async def test_a_reply_that_breaks_http_is_a_connection_error_that_says_why(
    serve: Callable[[Handler], RawServer], framed: bytes, message: str
) -> None:
    server = serve(answer(framed))
    error = await failure(client(server.url))
    assert error.kind == "connection" and error.retryable
    assert message in str(error) and KEY not in str(error)


@pytest.mark.anyio
async def test_the_request_head_names_the_host_the_path_and_the_length(
    serve: Callable[[Handler], RawServer],
) -> None:
    server = serve(answer(reply()))
    await post(client(server.url + "/api/"), b'{"q": 1}')
    lines = server.requests[0].split(b"\r\n")
    assert lines[0] == b"POST /api/v1/x HTTP/1.1"
    fields = {k.lower(): v.strip() for k, _, v in (line.partition(b":") for line in lines[1:])}
    assert fields[b"host"] == b"127.0.0.1:%d" % server.port
    assert fields[b"content-length"] == b"8"
    assert fields[b"authorization"] == b"Bearer " + KEY.encode()
    assert fields[b"content-type"] == b"application/json"
    assert fields[b"accept-encoding"] == b"gzip, deflate"


@pytest.mark.anyio
async def test_reply_headers_are_read_case_insensitively_with_the_reason(
    serve: Callable[[Handler], RawServer],
) -> None:
    extra = b"X-Request-ID: req-1\r\nretry-after: 3\r\nx-many: a\r\nX-Many: b\r\n"
    server = serve(answer(reply(b"{}", extra, status=b"200 Fine Thanks")))
    got = await post(client(server.url))
    assert got.reason == "Fine Thanks"
    assert got.headers["x-request-id"] == "req-1" and got.headers["Retry-After"] == "3"
    assert got.headers["X-MANY"] == "a"


@pytest.mark.anyio
async def test_a_call_cut_short_never_leaves_its_connection_in_the_pool(
    serve: Callable[[Handler], RawServer],
) -> None:
    import asyncio

    given_up, late_sent = threading.Event(), threading.Event()

    def handler(conn: socket.socket, head: bytes, body: bytes) -> bool:
        n = len(server.requests)
        if n == 1:
            given_up.wait(10)  # the first call gives up before this reply
        try:
            conn.sendall(reply(b'{"n": %d}' % n))
        finally:
            if n == 1:
                late_sent.set()
        return True

    server = serve(handler)
    http = client(server.url)
    try:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(http.call("/v1/x", b"{}", 1, raw), 0.1)
        await asyncio.sleep(0)
        assert isinstance(http.wire, ConnWire) and not http.wire.pool  # closed, not left open
        given_up.set()
        assert late_sent.wait(5)  # the late reply is on (or refused by) the first connection
        second = (await http.call("/v1/x", b"{}", 1, raw)).value
    finally:
        await http.aclose()
    assert second.body == b'{"n": 2}' and server.accepted == 2


@pytest.mark.anyio
async def test_an_idle_connection_past_keep_alive_is_not_reused(
    serve: Callable[[Handler], RawServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    from ragbatch.providers import _http_conn

    server = serve(answer(reply()))
    http = client(server.url)
    try:
        await http.call("/v1/x", b"{}", 1, raw)
        await http.call("/v1/x", b"{}", 1, raw)
        assert server.accepted == 1
        monkeypatch.setattr(_http_conn, "KEEPALIVE_S", 0.0)
        await http.call("/v1/x", b"{}", 1, raw)
    finally:
        await http.aclose()
    assert server.accepted == 2


@pytest.mark.anyio
async def test_a_name_is_resolved_and_an_unknown_one_is_a_connection_error(
    serve: Callable[[Handler], RawServer],
) -> None:
    server = serve(answer(reply(b'{"by": "name"}')))
    got = await post(client(f"http://localhost:{server.port}"))
    assert got.body == b'{"by": "name"}'
    error = await failure(client("http://no-such-host.invalid:9"))
    assert error.kind == "connection"


def test_a_direct_origin_gets_the_own_wire_and_a_proxy_or_credentials_aiohttp_s(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    policy = Policy()
    assert isinstance(open_wire("https://api.typesafe.ai", policy), ConnWire)
    assert isinstance(open_wire("http://127.1:8080/v1/", policy), ConnWire)
    assert isinstance(open_wire("https://user:pw@api.typesafe.ai", policy), AiohttpWire)
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:3128")
    assert isinstance(open_wire("https://api.typesafe.ai", policy), AiohttpWire)


@pytest.mark.anyio
@pytest.mark.usefixtures("each_wire")
async def test_third_party_servers_framings_are_read(tmp_path: Path) -> None:
    """aiohttp's server compressing a chunked reply, and the standard library's HTTP/1.0
    server whose body ends at the close: servers users really run, not our own bytes."""
    import asyncio
    import http.server

    from aiohttp import web

    async def handle(request: web.Request) -> web.StreamResponse:
        response = web.json_response({"ok": 1, "pad": "x" * 5000})
        response.enable_compression(web.ContentCoding.gzip)
        response.enable_chunked_encoding()
        return response

    app = web.Application()
    app.router.add_post("/v1/x", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]

    class Old(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b'{"ok": 1}')

        def log_message(self, *args: object) -> None:
            pass

    old = http.server.HTTPServer(("127.0.0.1", 0), Old)
    threading.Thread(target=old.serve_forever, daemon=True).start()
    try:
        got = await post(client(f"http://127.0.0.1:{port}"))
        assert got.headers["Content-Encoding"] == "gzip"
        assert got.body == b'{"ok": 1, "pad": "%s"}' % (b"x" * 5000)
        plain = client(f"http://127.0.0.1:{old.server_address[1]}")
        try:
            for _ in range(2):
                assert (await plain.call("/v1/x", b"{}", 1, raw)).value.body == b'{"ok": 1}'
        finally:
            await plain.aclose()
    finally:
        old.shutdown()
        old.server_close()
        await runner.cleanup()
        await asyncio.sleep(0)


def test_a_client_used_from_another_event_loop_opens_new_connections(
    serve: Callable[[Handler], RawServer],
) -> None:
    import asyncio

    server = serve(answer(reply()))
    http = client(server.url)

    async def status() -> int:
        return (await http.call("/v1/x", b"{}", 1, raw)).value.status

    assert asyncio.run(status()) == 200
    assert asyncio.run(status()) == 200  # the first loop's connection died with it
    asyncio.run(http.aclose())
    assert server.accepted == 2


@pytest.mark.anyio
async def test_a_name_s_addresses_are_raced_past_one_that_hangs(
    serve: Callable[[Handler], RawServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first address takes no connection (its accept queue is full: a SYN waits), the
    second answers: raced, the call takes ~0.25 s, not the attempt's 5 s."""
    server = serve(answer(reply(b'{"via": "second"}')))
    stuck = socket.create_server(("127.0.0.1", 0), backlog=0)
    filler = socket.create_connection(stuck.getsockname())  # fills the queue
    http = client(f"http://service.test:{server.port}")
    wire = http.wire
    assert isinstance(wire, ConnWire)
    infos: list[tuple[int, int, int, str, tuple[str, int]]] = [
        (socket.AF_INET, socket.SOCK_STREAM, 6, "", stuck.getsockname()),
        (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", server.port)),
    ]
    looked_up = []

    async def look_up(loop: object) -> list[tuple[int, int, int, str, tuple[str, int]]]:
        looked_up.append(1)
        return infos

    monkeypatch.setattr(wire, "_look_up", look_up)
    started = time.perf_counter()
    try:
        assert (await post(http)).body == b'{"via": "second"}'
    finally:
        filler.close()
        stuck.close()
    assert time.perf_counter() - started < 2.5 and looked_up == [1]


@pytest.mark.anyio
async def test_an_ipv6_literal_is_connected_to_and_named_in_the_host_header() -> None:
    try:
        listener = socket.create_server(("::1", 0), family=socket.AF_INET6)
    except OSError:
        pytest.skip("no IPv6 loopback here")
    port = listener.getsockname()[1]
    heads: list[bytes] = []

    def serve_one() -> None:
        conn, _ = listener.accept()
        with conn:
            heads.append(conn.recv(65536))
            conn.sendall(reply(b'{"v6": true}'))

    threading.Thread(target=serve_one, daemon=True).start()
    try:
        got = await post(client(f"http://[::1]:{port}"))
    finally:
        listener.close()
    assert got.body == b'{"v6": true}'
    assert b"\r\nHost: [::1]:%d\r\n" % port in heads[0]


@pytest.mark.anyio
async def test_what_a_burst_left_idle_is_closed_once_past_keep_alive(
    serve: Callable[[Handler], RawServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncio

    from ragbatch.providers import _http_conn

    burst = threading.Barrier(4, timeout=10)

    def handler(conn: socket.socket, head: bytes, body: bytes) -> bool:
        if len(server.requests) <= 4:
            burst.wait()  # four calls at once: each has a connection of its own
        conn.sendall(reply())
        return True

    server = serve(handler)
    http = client(server.url)
    wire = http.wire
    assert isinstance(wire, ConnWire)
    monkeypatch.setattr(_http_conn, "KEEPALIVE_S", 0.4)
    loop = asyncio.get_running_loop()
    real_time, passed = loop.time, [0.0]
    # the loop's clock, which times keep-alive, runs ahead by what the test says has passed
    monkeypatch.setattr(loop, "time", lambda: real_time() + passed[0])
    try:
        await asyncio.gather(*(http.call("/v1/x", b"{}", 1, raw) for _ in range(4)))
        assert len(wire.pool) == 4
        for _ in range(6):  # one call at a time: the newest connection serves them all
            await http.call("/v1/x", b"{}", 1, raw)
            passed[0] += 0.1
        await asyncio.sleep(0)  # the closed connections' connection_lost
        assert len(wire.pool) == 1 and server.accepted == 4
    finally:
        await http.aclose()
