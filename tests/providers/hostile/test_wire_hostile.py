"""The wires against servers that misbehave on purpose, raw sockets on 127.0.0.1: a header line
that never ends, replies that break HTTP or a certificate nobody trusts (never retried), a
stray reply waiting in the socket. Proxies and the key's spellings: test_wire_proxy_keys.py."""

from __future__ import annotations

import asyncio
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragbatch.cli._app import app
from ragbatch.core._errors import EXIT_ABORTED, RunAborted
from ragbatch.providers._http_protocol import MAX_HEAD_BYTES
from ragbatch.providers._jev import JevSettings
from tests.providers.hostile.hostile_http import (
    KEY,
    ROOT,
    Handler,
    Server,
    answer,
    call,
    client,
    failure,
    reply,
)
from tests.providers.raw_http import tls_context

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
    cert, context = tls_context(tmp_path)
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
