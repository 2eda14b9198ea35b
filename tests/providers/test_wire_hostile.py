"""The wires against servers that misbehave on purpose, raw sockets on 127.0.0.1: a header line
that never ends, replies that break HTTP or a certificate nobody trusts (never retried), a
stray reply waiting in the socket, proxies the environment names, a key echoed in another case
or backwards."""

from __future__ import annotations

import asyncio
import shutil
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragbatch.cli._app import app
from ragbatch.core._errors import EXIT_ABORTED, ProviderError, RunAborted
from ragbatch.providers._apikey import Redactor
from ragbatch.providers._http_aiohttp import AiohttpWire
from ragbatch.providers._http_client import Policy, RetryingClient, Service
from ragbatch.providers._http_conn import ConnWire
from ragbatch.providers._http_protocol import MAX_HEAD_BYTES
from ragbatch.providers._http_proxy import find_proxy, is_bypassed, proxy_for
from ragbatch.providers._jev import JevSettings
from ragbatch.providers._ratelimit import RateLimiter
from ragbatch.providers._replies import HttpReply

ROOT = Path(__file__).resolve().parents[2]
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


@pytest.fixture
def serve() -> Iterator[Callable[[Handler], Server]]:
    servers: list[Server] = []

    def start(handler: Handler) -> Server:
        servers.append(Server(handler))
        return servers[-1]

    yield start
    for server in servers:
        server.listener.close()


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


@pytest.fixture
def no_proxy_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in [*PROXY_VARIABLES, "REQUEST_METHOD"]:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


# --- 1. what never ends is counted as it arrives ----------------------------------------------


def endless(start: bytes, more: bytes) -> Handler:
    """Sends ``start``, then ``more`` again and again until the client goes away."""

    def handler(conn: socket.socket, head: bytes, body: bytes) -> bool:
        conn.sendall(start)
        while True:
            conn.sendall(more)

    return handler


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("start", "more"),
    [
        pytest.param(b"HTTP/1.1 200 OK\r\nx-endless: ", b"a" * 4096, id="header-value"),
        pytest.param(b"HTTP/1.1 200 OK\r\n", b"x" * 4096, id="header-name"),
        pytest.param(b"HTTP/1.1 200 ", b"O" * 4096, id="reason"),
        pytest.param(b"", b"HTTP/1.1 100 Continue\r\n\r\n" * 64, id="interim-replies"),
        pytest.param(
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\nx-trailer: ",
            b"t" * 4096,
            id="trailer",
        ),
    ],
)
async def test_what_never_ends_fails_at_the_head_cap_not_the_timeout(
    serve: Callable[[Handler], Server], start: bytes, more: bytes
) -> None:
    server = serve(endless(start, more))
    started = time.perf_counter()
    error = await failure(client(server.url, attempt_timeout_s=10, max_retries=4))
    assert time.perf_counter() - started < 5  # not the attempt's 10 s, nor 5 attempts
    assert error.kind == "response-too-large" and not error.retryable
    assert f"passed {MAX_HEAD_BYTES} bytes" in str(error)
    assert server.accepted == 1


@pytest.mark.anyio
async def test_aiohttp_refuses_an_endless_header_line_as_too_large(
    serve: Callable[[Handler], Server],
) -> None:
    server = serve(endless(b"HTTP/1.1 200 OK\r\nx-endless: ", b"a" * 4096))
    error = await failure(client(server.url, "aiohttp", attempt_timeout_s=10, max_retries=4))
    assert error.kind == "response-too-large" and server.accepted == 1


@pytest.mark.anyio
async def test_a_head_that_arrives_a_byte_at_a_time_is_read(
    serve: Callable[[Handler], Server],
) -> None:
    def handler(conn: socket.socket, head: bytes, body: bytes) -> bool:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for byte in reply(b'{"ok": 1}', b"x-pad: %s\r\n" % (b"p" * 300)):
            conn.sendall(bytes([byte]))
        return True

    http = client(serve(handler).url)
    try:
        assert (await call(http)).body == b'{"ok": 1}'
    finally:
        await http.aclose()


# --- 3. what would fail again is not retried ---------------------------------------------------


BREAKS_HTTP = {
    "duplicate-length": b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-length: 12\r\n\r\n{}",
    "bad-chunk": b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n",
    "brotli": reply(b"{}", b"content-encoding: br\r\n"),
    "bad-status": b"HTTP/1.1 2OO OK\r\n\r\n",
}


@pytest.mark.anyio
@pytest.mark.parametrize("wire", ["conn", "aiohttp"])
@pytest.mark.parametrize("name", list(BREAKS_HTTP))
async def test_a_reply_that_breaks_http_is_sent_once(
    serve: Callable[[Handler], Server], wire: str, name: str
) -> None:
    server = serve(answer(BREAKS_HTTP[name]))
    error = await failure(client(server.url, wire, max_retries=4))
    assert error.kind == "invalid-http-response" and not error.retryable
    assert len(server.requests) == 1
    assert "\n" not in str(error) and KEY not in str(error)


@pytest.mark.anyio
@pytest.mark.parametrize("wire", ["conn", "aiohttp"])
async def test_a_dropped_connection_is_still_retried(
    serve: Callable[[Handler], Server], wire: str
) -> None:
    server = serve(lambda conn, head, body: False)  # reads the request, closes
    error = await failure(client(server.url, wire, max_retries=2))
    assert error.kind == "connection" and len(server.requests) == 3


@pytest.fixture
def tls_server(tmp_path: Path) -> Iterator[tuple[str, Path, list[int]]]:
    """A TLS server on 127.0.0.1 with a self-signed certificate: its URL, the certificate,
    and a list that grows by one at each handshake attempted."""
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
    handshakes: list[int] = []

    def serve(conn: socket.socket) -> None:
        try:
            with context.wrap_socket(conn, server_side=True) as tls:
                tls.recv(65536)
                tls.sendall(reply(b'{"tls": true}', b"connection: close\r\n"))
        except (OSError, ssl.SSLError):
            pass

    def accept() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            handshakes.append(1)
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    yield f"https://127.0.0.1:{listener.getsockname()[1]}", cert, handshakes
    listener.close()


@pytest.mark.anyio
@pytest.mark.parametrize("wire", ["conn", "aiohttp"])
async def test_an_untrusted_certificate_stops_the_run_at_the_first_handshake(
    tls_server: tuple[str, Path, list[int]], wire: str
) -> None:
    url, _, handshakes = tls_server
    http = client(url, wire, max_retries=4)
    try:
        with pytest.raises(RunAborted) as caught:
            await call(http)
    finally:
        await http.aclose()
    message = str(caught.value)
    assert f"the test API at {url} presented a TLS certificate that failed verification" in message
    assert "check --base-url" in message and "no request was sent" in message
    assert len(handshakes) == 1


@pytest.mark.anyio
async def test_ssl_cert_file_makes_the_own_wire_trust_a_certificate(
    tls_server: tuple[str, Path, list[int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, cert, _ = tls_server
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # what the message above suggests
    http = client(url)
    try:
        assert (await call(http)).body == b'{"tls": true}'
    finally:
        await http.aclose()


def test_a_run_against_an_untrusted_certificate_ends_at_once_with_one_line(
    tls_server: tuple[str, Path, list[int]], tmp_path: Path
) -> None:
    url, _, handshakes = tls_server
    rows = (ROOT / "datasets" / "rag-fixture.jsonl").read_text().splitlines()[:4]
    dataset = tmp_path / "four.jsonl"
    dataset.write_text("\n".join(rows) + "\n")
    args = [
        "run", str(dataset), "--provider", "jev", "--base-url", url, "--model", "jev-1.13.0",
        "--cache-dir", str(tmp_path / "cache"), "--out", str(tmp_path / "report.json"),
        "--pricing", str(ROOT / "pricing" / "typesafe-2026-12.json"), "--concurrency", "1",
    ]  # fmt: skip
    result = CliRunner().invoke(app, args, env={"TYPESAFE_API_KEY": KEY})
    assert result.exit_code == EXIT_ABORTED, result.stdout + result.stderr
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: the Jev API at ")
    assert "certificate that failed verification" in result.stderr
    assert "check --base-url" in result.stderr
    assert len(handshakes) == 1 and not (tmp_path / "report.json").exists()


# --- 4. one reply per request -------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_stray_reply_waiting_in_the_socket_never_answers_the_next_call(
    serve: Callable[[Handler], Server],
) -> None:
    read, sent = threading.Event(), threading.Event()

    def handler(conn: socket.socket, head: bytes, body: bytes) -> bool:
        n = len(server.requests)
        conn.sendall(reply(b'{"n": %d}' % n))
        if n == 1:  # a second, unasked-for reply, once the client has read the real one
            assert read.wait(5)
            conn.sendall(reply(b'{"stray": true}'))
            sent.set()
        return True

    server = serve(handler)
    http = client(server.url)
    try:
        first = await call(http)
        read.set()
        # the event loop does not run until the stray reply is in the client's socket: it is
        # there, unread, when the next call takes the connection from the pool
        assert sent.wait(5)
        second = await call(http)
    finally:
        await http.aclose()
    assert (first.body, second.body) == (b'{"n": 1}', b'{"n": 2}')
    assert server.accepted == 2


@pytest.mark.anyio
async def test_a_connection_the_server_closed_while_idle_is_not_reused(
    serve: Callable[[Handler], Server],
) -> None:
    closed = threading.Event()

    def handler(conn: socket.socket, head: bytes, body: bytes) -> bool:
        conn.sendall(reply(b'{"n": %d}' % len(server.requests)))  # keep-alive, then a close
        conn.shutdown(socket.SHUT_RDWR)  # the end is in the client's socket once this returns
        closed.set()
        return False

    server = serve(handler)
    http = client(server.url)
    try:
        await call(http)
        assert closed.wait(5)  # the event loop does not run until the end has arrived
        assert (await call(http)).body == b'{"n": 2}'
    finally:
        await http.aclose()


@pytest.mark.anyio
@pytest.mark.parametrize("wire", ["conn", "aiohttp"])
async def test_without_keep_alive_a_late_stray_reply_is_never_read(
    serve: Callable[[Handler], Server], wire: str
) -> None:
    def handler(conn: socket.socket, head: bytes, body: bytes) -> bool:
        n = len(server.requests)
        conn.sendall(reply(b'{"n": %d}' % n))
        conn.sendall(reply(b'{"stray": %d}' % n))
        return True

    server = serve(handler)
    http = client(server.url, wire, keep_alive=False)
    try:
        bodies = [(await call(http)).body for _ in range(6)]
        more = await asyncio.gather(*(call(http) for _ in range(6)))
    finally:
        await http.aclose()
    assert bodies == [b'{"n": %d}' % n for n in range(1, 7)]
    assert sorted(r.body for r in more) == sorted(b'{"n": %d}' % n for n in range(7, 13))
    assert server.accepted == 12
    assert all(b"\r\nconnection: close" in h.lower() for h in server.requests)


def test_jev_settings_carry_keep_alive_to_the_client_s_policy() -> None:
    assert JevSettings(api_key=KEY).policy().keep_alive
    assert not JevSettings(api_key=KEY, keep_alive=False).policy().keep_alive


# --- 5. proxies --------------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "[::1]", "127.0.0.2"])
async def test_a_loopback_base_url_never_goes_through_a_proxy(
    serve: Callable[[Handler], Server], no_proxy_env: pytest.MonkeyPatch, host: str
) -> None:
    origin = serve(answer(reply(b'{"from": "origin"}')))
    proxy = serve(answer(reply(b'{"from": "proxy"}')))
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        no_proxy_env.setenv(name, proxy.url)
    assert proxy_for(f"http://{host}:{origin.port}") is None
    assert proxy_for(f"https://{host}/v1") is None
    if host == "127.0.0.1":
        http = client(origin.url)
        try:
            assert (await call(http)).body == b'{"from": "origin"}'
        finally:
            await http.aclose()
        assert proxy.requests == []


@pytest.mark.parametrize(
    ("no_proxy", "url", "bypassed"),
    [
        ("service.example:8080", "http://service.example:8080/v1", True),
        ("service.example:8080", "http://service.example:9090/v1", False),
        ("service.example:443", "https://service.example/v1", True),
        ("10.0.0.0/8", "http://10.1.2.3:80", True),
        ("10.0.0.0/8", "http://11.1.2.3:80", False),
        ("192.168.1.7", "http://192.168.1.7", True),
        ("fd00::/8", "http://[fd12::1]:80", True),
        ("[fd12::1]:8080", "http://[fd12::1]:8080", True),
        ("[fd12::1]:8080", "http://[fd12::1]:80", False),
        (".example.com", "https://api.example.com", True),
        ("*.example.com", "https://example.com", True),
        ("example.com", "https://notexample.com", False),
        ("other, EXAMPLE.com", "https://API.example.com.", True),
        ("*", "https://anything.example", True),
        ("10.0.0.0/8", "http://ten.example", False),
    ],
)
def test_no_proxy_entries_with_ports_and_cidr_blocks_are_honoured(
    no_proxy_env: pytest.MonkeyPatch, no_proxy: str, url: str, bypassed: bool
) -> None:
    no_proxy_env.setenv("HTTP_PROXY", "http://proxy.example:3128")
    no_proxy_env.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    no_proxy_env.setenv("NO_PROXY", no_proxy)
    assert (proxy_for(url) is None) == bypassed


def test_all_proxy_is_the_proxy_of_every_scheme_without_its_own(
    no_proxy_env: pytest.MonkeyPatch,
) -> None:
    no_proxy_env.setenv("ALL_PROXY", "http://all.example:1080")
    assert proxy_for("https://api.example") == "http://all.example:1080"
    no_proxy_env.setenv("https_proxy", "http://tls.example:3128")
    assert proxy_for("https://api.example") == "http://tls.example:3128"
    assert proxy_for("http://api.example") == "http://all.example:1080"
    no_proxy_env.setenv("https_proxy", "")  # an empty lower-case variable hides HTTPS_PROXY
    no_proxy_env.setenv("HTTPS_PROXY", "http://hidden.example:3128")
    proxy = find_proxy("https://api.example")
    assert proxy is not None and str(proxy) == "http://all.example:1080 (from ALL_PROXY)"
    no_proxy_env.setenv("REQUEST_METHOD", "POST")  # CGI: HTTP_PROXY may come from a client
    no_proxy_env.setenv("HTTP_PROXY", "http://client-chosen.example:1")
    assert proxy_for("http://api.example") == "http://all.example:1080"
    assert is_bypassed("api.example", 443, "example:80 api.example")


@pytest.mark.anyio
async def test_a_proxy_that_is_down_is_named_in_the_error(
    no_proxy_env: pytest.MonkeyPatch,
) -> None:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]  # closed once this block ends: nothing listens there
    no_proxy_env.setenv("HTTP_PROXY", f"http://user:proxy-secret@127.0.0.1:{port}")
    error = await failure(client("http://service.invalid:8080"))
    assert error.kind == "connection" and error.retryable
    message = str(error)
    assert f"the proxy http://127.0.0.1:{port} (from HTTP_PROXY) could not be reached" in message
    assert "proxy-secret" not in message and KEY not in message


# --- 6. the key in another case, or backwards ---------------------------------------------------


@pytest.mark.parametrize(
    "echo",
    [KEY.upper(), KEY.lower(), KEY.swapcase(), KEY[::-1], KEY[::-1].upper(), KEY.upper()[:9]],
    ids=["upper", "lower", "swapped", "reversed", "reversed-upper", "upper-prefix"],
)
def test_a_key_in_another_case_or_reversed_is_masked(echo: str) -> None:
    masked = Redactor(KEY)(f"invalid key {echo}!")
    assert masked == "invalid key ***!"


def test_case_folding_keeps_other_text_intact() -> None:
    redact = Redactor(KEY)
    text = "İstanbul \u212a KELVIN ß straße"  # letters whose Unicode lower() changes length
    assert redact(text) == text
    assert redact(f"İİ {KEY.upper()} ßß") == "İİ *** ßß"


@pytest.mark.anyio
async def test_a_server_that_echoes_the_key_upper_cased_or_reversed_leaks_it_nowhere(
    serve: Callable[[Handler], Server],
) -> None:
    body = b'{"error": "bad request for %s (%s)"}' % (KEY.upper().encode(), KEY[::-1].encode())
    server = serve(answer(reply(body).replace(b"200 OK", b"400 Bad Request")))
    error = await failure(client(server.url))
    message = str(error).lower()
    assert error.status == 400 and "bad request for *** (***)" in message
    assert KEY.lower()[:8] not in message and KEY[::-1].lower()[:8] not in message
