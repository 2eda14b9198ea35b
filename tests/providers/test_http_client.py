"""The one HTTP client against a raw-socket HTTP/1.1 server on 127.0.0.1: framing edge cases and
the mapping of failures to the project's kinds, over both wires (the project's own connections,
and aiohttp's session that a proxy gets). The server and the client: tests/providers/raw_http.py.
"""

from __future__ import annotations

import gzip
import socket
import threading
import time
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.providers.raw_http import (
    KEY,
    Handler,
    RawServer,
    answer,
    client,
    failure,
    hang_up,
    post,
    raw,
    reply,
)


def chunked(*parts: bytes) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts) + b"0\r\n\r\n"


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
    assert error.kind == "invalid-http-response" and not error.retryable


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


# --- the project's own connections: framing llhttp does, the head -------------------------


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
async def test_a_reply_that_breaks_http_fails_unretried_and_says_why(
    serve: Callable[[Handler], RawServer], framed: bytes, message: str
) -> None:
    server = serve(answer(framed))
    error = await failure(client(server.url))
    kind = "response-too-large" if "head" in message else "invalid-http-response"
    assert error.kind == kind and not error.retryable
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
