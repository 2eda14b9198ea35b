"""The default wire: HTTP/1.1 over asyncio's own transports, a pool of keep-alive
connections (:class:`~ragbatch.providers._http_protocol.Connection`, each reply framed by
llhttp) to one origin (async I/O).

Why not aiohttp's client here: one POST through ``aiohttp.ClientSession`` costs about four
times the CPU of the least an ``asyncio.Protocol`` exchange costs (``bench/bench_transport.py``;
docs/benchmarks.md), ~10 % of a live row's CPU spent on machinery a row does not use (the
request and response objects, the cookie jar, the signals, the per-request tasks). What this
wire writes by hand is only what is left around the parser: the request head, the pool, the
attempt's deadline, decoding under the cap and the failure kinds.

A connection goes back to the pool only after a complete reply that keeps it alive and
nothing after it: stray bytes, a reply cut short, a parse error, a timeout or a cancelled call
close it. An idle connection is reused for :data:`KEEPALIVE_S` at most (aiohttp's default),
the newest first; older ones are closed as connections come back, so a burst's leftovers do
not stay open.

One reply per request, as far as HTTP/1.1 allows: bytes that arrive after a reply and before
the connection's next request is written (in the reply's own read, read later by the event
loop, or still in the socket when the connection is taken from the pool: one ``poll`` that
does not wait) close the connection and are never read as a reply; so does the server's
close. What no client can tell apart is an extra reply that arrives only after the next
request is written: it reads as that request's reply (HTTP/1.1 numbers nothing), and the
real one then closes the connection. ``Policy(keep_alive=False)`` sends every request on a
connection of its own (``Connection: close``), which rules that out too.

Names are resolved once per :data:`DNS_TTL_S` (by the system resolver, in asyncio's
executor), and a new connection races their addresses as aiohttp does
(``aiohappyeyeballs``, RFC 8305). What is not this wire's — a proxy, credentials in the URL —
goes to aiohttp's (:func:`ragbatch.providers._http_wire.open_wire` chooses).
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections import deque
from collections.abc import Mapping
from urllib.parse import urlsplit

import aiohappyeyeballs
from aiohappyeyeballs import AddrInfoType

from ragbatch.providers._http_errors import BadReply, TooLarge
from ragbatch.providers._http_protocol import Connection
from ragbatch.providers._http_types import USER_AGENT, Policy
from ragbatch.providers._replies import HttpReply

KEEPALIVE_S = 15.0  # an idle connection older than this is closed, not reused
DNS_TTL_S = 10.0  # a name's addresses are looked up again after this
HAPPY_EYEBALLS_S = 0.25  # a name's next address is tried this long after the one before


def _retrieved(task: asyncio.Task[list[AddrInfoType]]) -> None:
    if not task.cancelled():
        task.exception()


class ConnWire:
    """POST over a pool of :class:`Connection` to one ``http://`` or ``https://`` origin."""

    errors: tuple[type[BaseException], ...] = (OSError, TimeoutError, TooLarge, BadReply)

    def __init__(self, base_url: str, policy: Policy) -> None:
        self.url = base_url
        parts = urlsplit(base_url)
        self.tls = parts.scheme == "https"
        self.host = parts.hostname or ""
        self.port = parts.port or (443 if self.tls else 80)
        self.policy = policy
        self.prefix = parts.path.rstrip("/")
        self.fixed = (
            f"Host: {parts.netloc}\r\nUser-Agent: {USER_AGENT}\r\nAccept: */*\r\n"
            "Accept-Encoding: gzip, deflate\r\n"
        ) + ("" if policy.keep_alive else "Connection: close\r\n")
        self.idle: deque[Connection] = deque()  # the oldest left, the newest right
        self.pool: set[Connection] = set()
        self._loop: asyncio.AbstractEventLoop | None = None  # the pool's: another starts anew
        self._ssl: ssl.SSLContext | None = None
        self._addresses: list[AddrInfoType] = []
        self._resolved_at = -DNS_TTL_S
        self._resolving: asyncio.Task[list[AddrInfoType]] | None = None
        try:
            socket.inet_pton(socket.AF_INET6 if ":" in self.host else socket.AF_INET, self.host)
            self._literal = True
        except OSError:
            self._literal = False

    async def post(self, path: str, body: bytes, headers: Mapping[str, str]) -> HttpReply:
        """One exchange; :attr:`errors` as they come."""
        request = self._request(path, body, headers)
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            self._adopt(loop)
        now = loop.time()
        deadline = now + self.policy.attempt_timeout_s
        connection = self._idle(now) or await self._connect(loop, deadline)
        waiter = connection.send(request, loop)
        timer = loop.call_at(deadline, connection.expire)
        try:
            reply = await waiter
        except BaseException:
            connection.close()  # a timeout, a failure, a cancelled call: never reused
            raise
        finally:
            timer.cancel()
        if connection.reusable and self.policy.keep_alive:
            connection.idle_since = now = loop.time()
            idle = self.idle
            idle.append(connection)
            while idle and now - idle[0].idle_since >= KEEPALIVE_S:  # a burst's leftovers
                idle.popleft().close()
        else:
            connection.close()
        return reply

    def _request(self, path: str, body: bytes, headers: Mapping[str, str]) -> bytes:
        lines = []
        for name, value in headers.items():
            if "\n" in name or "\r" in name or "\n" in value or "\r" in value:
                raise ValueError(f"a line break in the {name.strip()!r} header")
            lines.append(f"{name}: {value}\r\n")
        head = (
            f"POST {self.prefix}{path} HTTP/1.1\r\n{self.fixed}{''.join(lines)}"
            f"Content-Length: {len(body)}\r\n\r\n"
        )
        return head.encode() + body

    def _idle(self, now: float) -> Connection | None:
        idle = self.idle
        while idle:
            connection = idle.pop()
            if now - connection.idle_since < KEEPALIVE_S and connection.is_silent():
                return connection
            connection.close()
        return None

    async def _connect(self, loop: asyncio.AbstractEventLoop, deadline: float) -> Connection:
        cap = self.policy.max_response_bytes
        context = self._context() if self.tls else None
        hostname = self.host if context is not None else None
        async with asyncio.timeout_at(deadline):
            if self._literal:  # an address: nothing to look up or race
                _, connection = await loop.create_connection(
                    lambda: Connection(cap, self.pool),
                    self.host,
                    self.port,
                    ssl=context,
                    server_hostname=hostname,
                )
                return connection
            # a name's addresses raced as aiohttp races them (RFC 8305: the next family's
            # first address after 0.25 s), so a broken IPv6 route does not cost the attempt
            sock = await aiohappyeyeballs.start_connection(
                await self._resolve(loop), happy_eyeballs_delay=HAPPY_EYEBALLS_S, interleave=1
            )
            _, connection = await loop.create_connection(
                lambda: Connection(cap, self.pool), sock=sock, ssl=context, server_hostname=hostname
            )
            return connection

    async def _resolve(self, loop: asyncio.AbstractEventLoop) -> list[AddrInfoType]:
        """The name's addresses, from the system resolver, cached for :data:`DNS_TTL_S`."""
        if loop.time() - self._resolved_at < DNS_TTL_S:
            return self._addresses
        if self._resolving is None or self._resolving.done():
            # one look-up for every connection that waits on it, finished even if the call
            # that started it is cancelled
            self._resolving = loop.create_task(self._look_up(loop))
            # its error reaches every caller still waiting; retrieved here when none is left
            self._resolving.add_done_callback(_retrieved)
        return await asyncio.shield(self._resolving)

    async def _look_up(self, loop: asyncio.AbstractEventLoop) -> list[AddrInfoType]:
        infos = await loop.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM)
        self._addresses, self._resolved_at = list(infos), loop.time()
        return self._addresses

    def _context(self) -> ssl.SSLContext:
        if self._ssl is None:
            verify = self.policy.verify
            if verify is False:
                context = ssl.create_default_context()
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
            else:
                context = ssl.create_default_context(cafile=None if verify is True else verify)
            self._ssl = context
        return self._ssl

    def _adopt(self, loop: asyncio.AbstractEventLoop) -> None:
        """Forget another event loop's connections and look-up: they cannot serve this one
        (its sockets close when their transports are collected)."""
        self.idle, self.pool, self._loop, self._resolving = deque(), set(), loop, None

    async def aclose(self) -> None:
        """Close this event loop's connections."""
        if asyncio.get_running_loop() is not self._loop:
            self._adopt(asyncio.get_running_loop())
        for connection in list(self.pool):
            connection.close()
        self.idle.clear()


__all__ = ["DNS_TTL_S", "HAPPY_EYEBALLS_S", "KEEPALIVE_S", "ConnWire"]
