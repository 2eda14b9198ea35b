"""FanOutTransport against a raw HTTP/1.1 server on 127.0.0.1: keep-alive, framing, errors."""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import anyio
import httpx
import pytest

from ragbatch.providers.transport import FanOutTransport, HttpClient, LeanClient

# (request head, request body) -> raw response bytes, or None to close without answering
Script = Callable[[bytes, bytes], bytes | None]


def ok(body: bytes = b"{}", extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n%s\r\n%s" % (len(body), extra, body)


class RawServer:
    """Accepts connections, reads each request (Content-Length framed), answers by script."""

    def __init__(self, script: Script, listener: socket.socket | None = None) -> None:
        self.script = script
        self.accepted = 0
        self.requests: list[tuple[bytes, bytes]] = []
        self.close_after: set[bytes] = set()  # request bodies after whose reply it hangs up
        self.listener = listener or socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
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
                self.requests.append((head, body))
                reply = self.script(head, body)
                if reply is None:
                    return
                conn.sendall(reply)
                if b"connection: close" in reply.lower() or body in self.close_after:
                    return

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def serve() -> Iterator[Callable[[Script], RawServer]]:
    servers: list[RawServer] = []

    def start(script: Script) -> RawServer:
        servers.append(RawServer(script))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def run(server: RawServer, body: Callable[[httpx.AsyncClient], Awaitable[None]]) -> None:
    async def main() -> None:
        async with httpx.AsyncClient(base_url=server.url, transport=FanOutTransport()) as client:
            await body(client)

    anyio.run(main)


def test_sequential_calls_reuse_one_keep_alive_connection(
    serve: Callable[[Script], RawServer],
) -> None:
    server = serve(lambda head, body: ok(b'{"echo": %d}' % len(body)))

    async def calls(client: httpx.AsyncClient) -> None:
        for i in range(5):
            response = await client.post("/v1/systemone?x=1", content=b"a" * i)
            assert response.status_code == 200
            assert response.json() == {"echo": i}
            assert response.http_version == "HTTP/1.1"
            assert response.reason_phrase == "OK"

    run(server, calls)
    assert server.accepted == 1
    head = server.requests[0][0]
    assert head.startswith(b"POST /v1/systemone?x=1 HTTP/1.1\r\n")
    assert b"\r\nhost: 127.0.0.1:" in head.lower()


def test_concurrent_calls_get_a_connection_each_then_reuse_them(
    serve: Callable[[Script], RawServer],
) -> None:
    def slow(head: bytes, body: bytes) -> bytes:
        time.sleep(0.05)
        return ok()

    server = serve(slow)

    async def calls(client: httpx.AsyncClient) -> None:
        for _ in range(3):
            async with anyio.create_task_group() as tg:
                for _ in range(8):
                    tg.start_soon(lambda: client.post("/", content=b"x"))

    run(server, calls)
    assert server.accepted == 8
    assert len(server.requests) == 24


def test_chunked_bodies_interim_responses_and_bodies_read_to_close(
    serve: Callable[[Script], RawServer],
) -> None:
    replies = iter(
        [
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
            b"3;ext=1\r\nabc\r\n2\r\nde\r\n0\r\ntrailer: x\r\n\r\n",
            b"HTTP/1.1 204 No Content\r\n\r\n",
            b"HTTP/1.0 200 OK\r\ncontent-type: text/plain\r\n\r\nuntil close",
        ]
    )
    server = serve(lambda head, body: next(replies))
    server.close_after.add(b"last")
    seen: list[tuple[int, bytes]] = []

    async def calls(client: httpx.AsyncClient) -> None:
        for content in (b"{}", b"{}", b"last"):
            response = await client.post("/", content=content)
            seen.append((response.status_code, response.content))

    run(server, calls)
    assert seen == [(200, b"abcde"), (204, b""), (200, b"until close")]
    assert server.accepted == 1  # the body read to close was the connection's last


def test_an_idle_connection_the_server_closed_is_replaced_not_failed(
    serve: Callable[[Script], RawServer],
) -> None:
    server = serve(
        lambda head, body: ok(extra=b"connection: close\r\n") if body == b"bye" else ok()
    )
    server.close_after.add(b"then-idle-close")  # answered normally, then closed while idle
    transport = FanOutTransport()

    async def main() -> None:
        async with httpx.AsyncClient(base_url=server.url, transport=transport) as client:
            assert (await client.post("/", content=b"hi")).status_code == 200
            assert transport.connections == 1
            assert (await client.post("/", content=b"bye")).status_code == 200
            assert transport.connections == 0  # "connection: close" is honoured
            assert (await client.post("/", content=b"then-idle-close")).status_code == 200
            await anyio.sleep(0.1)
            assert (await client.post("/", content=b"again")).status_code == 200

    anyio.run(main)
    assert server.accepted == 3


def test_errors_are_httpx_errors_and_broken_connections_are_not_reused(
    serve: Callable[[Script], RawServer],
) -> None:
    def script(head: bytes, body: bytes) -> bytes | None:
        if body == b"hang":
            time.sleep(1)
            return ok()
        if body == b"drop":
            return None
        if body == b"garbage":
            return b"SPDY/9 banana\r\n\r\n"
        return ok()

    server = serve(script)
    transport = FanOutTransport()

    async def main() -> None:
        async with httpx.AsyncClient(
            base_url=server.url, transport=transport, timeout=0.3
        ) as client:
            with pytest.raises(httpx.ReadTimeout):
                await client.post("/", content=b"hang")
            assert transport.connections == 0
            with pytest.raises(httpx.RemoteProtocolError):
                await client.post("/", content=b"drop")
            with pytest.raises(httpx.RemoteProtocolError, match="status line"):
                await client.post("/", content=b"garbage")
            assert transport.connections == 0
            with anyio.move_on_after(0.1):  # cancelled mid-call: the connection is dropped
                await client.post("/", content=b"hang")
            assert transport.connections == 0
            assert (await client.post("/", content=b"fine")).status_code == 200
            assert transport.connections == 1

    anyio.run(main)


def test_refused_connection_is_a_connect_error() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed again: nothing listens there

    async def main() -> None:
        async with httpx.AsyncClient(transport=FanOutTransport()) as client:
            with pytest.raises(httpx.ConnectError):
                await client.get(f"http://127.0.0.1:{port}/")

    anyio.run(main)


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
def test_tls_with_one_shared_context_verifies_the_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key),
         "-out", str(cert), "-days", "2", "-subj", "/CN=localhost",
         "-addext", "subjectAltName=DNS:localhost"],
        check=True, capture_output=True,
    )  # fmt: skip
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # the client trusts this certificate only
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    listener = context.wrap_socket(socket.create_server(("127.0.0.1", 0)), server_side=True)
    server = RawServer(lambda head, body: ok(body), listener)
    port = listener.getsockname()[1]
    transport = FanOutTransport()

    async def main() -> None:
        async with httpx.AsyncClient(transport=transport) as client:
            for i in range(3):
                response = await client.post(f"https://localhost:{port}/", content=b"%d" % i)
                assert response.content == b"%d" % i
            with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
                await client.post(f"https://127.0.0.1:{port}/", content=b"wrong host")

    anyio.run(main)
    assert server.accepted == 1  # three calls on one connection (the refused one never got in)
    server.close()


def test_lean_client_posts_under_the_base_path_with_httpx_requests_and_responses(
    serve: Callable[[Script], RawServer],
) -> None:
    server = serve(lambda head, body: ok(b'{"ok": true}', b"x-typesafe-request-id: r1\r\n"))
    standard: HttpClient = httpx.AsyncClient()  # the protocol httpx's client also satisfies
    assert standard is not None

    async def main() -> None:
        client = LeanClient(server.url + "/prefix/", timeout=5)
        for _ in range(2):
            response = await client.post(
                "/v1/systemone", content=b"{}", headers={"Authorization": "Bearer k"}
            )
            assert response.json() == {"ok": True}
            assert response.headers["x-typesafe-request-id"] == "r1"
            assert response.request.url == server.url + "/prefix/v1/systemone"
        await client.aclose()

    anyio.run(main)
    assert server.accepted == 1
    head = server.requests[0][0].lower()
    assert head.startswith(b"post /prefix/v1/systemone http/1.1\r\n")
    for line in (b"authorization: bearer k", b"content-length: 2", b"user-agent: ragbatch"):
        assert b"\r\n" + line in head
