"""The one HTTP client's connections: reused, never after stray bytes, a cut-short call or a
close, closed past keep-alive, opened anew on another event loop (a raw-socket server).
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable

import pytest

from ragbatch.providers._http_conn import ConnWire
from tests.providers.raw_http import Handler, RawServer, answer, client, raw, reply


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
