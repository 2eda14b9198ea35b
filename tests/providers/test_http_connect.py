"""How the one HTTP client reaches a server: proxies from the environment, TLS, names and their
addresses, IPv6 literals, and which wire an origin gets (raw-socket servers on loopback).
"""

from __future__ import annotations

import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ragbatch.core._errors import RunAborted
from ragbatch.providers._http_aiohttp import AiohttpWire
from ragbatch.providers._http_client import Policy
from ragbatch.providers._http_conn import ConnWire
from ragbatch.providers._http_wire import canonical_url, open_wire, proxy_for
from tests.providers.raw_http import (
    KEY,
    Handler,
    RawServer,
    answer,
    client,
    failure,
    post,
    reply,
    tls_context,
)


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


@pytest.fixture
def tls_server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A TLS loopback server with a self-signed certificate for 127.0.0.1; its URL and the
    certificate (the CA bundle that trusts it)."""
    cert, context = tls_context(tmp_path)
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
    with pytest.raises(RunAborted, match="certificate"):  # the system's CAs do not trust it
        await post(client(url))
    trusted = client(url, verify=str(cert))
    assert (await post(trusted)).body == b'{"tls": true}'
    unchecked = client(url, verify=False)
    assert (await post(unchecked)).body == b'{"tls": true}'


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
