"""The default wire: HTTP/1.1 over asyncio's own transports, a reply framed by llhttp (the
parser of Node.js, through httptools), a keep-alive pool of its own (async I/O).

Why not aiohttp's client here: one POST through ``aiohttp.ClientSession`` cost ~84 µs of CPU
against ~22 µs for the least an ``asyncio.Protocol`` exchange costs (``bench/bench_transport.py``,
README performance): ~10 % of a live row's CPU went to machinery a row does not use (the
request and response objects, the cookie jar, the signals, the per-request tasks). What this
module writes by hand is only what is left around the parser: the request head, the pool, the
attempt's deadline, decoding under the cap and the failure kinds. The framing — status line,
headers, ``Content-Length``, chunked, a body read to the close, interim 1xx replies, HTTP/1.0
and ``Connection: close`` — is llhttp's, the parser Node.js and uvicorn use.

One exchange, one connection at a time (no pipelining). A connection goes back to the pool
only after a complete reply that keeps it alive and nothing after it: stray bytes, a reply
cut short, a parse error, a timeout or a cancelled call close it. An idle connection is
reused for :data:`KEEPALIVE_S` at most (aiohttp's default), the newest first; older ones are
closed as connections come back, so a burst's leftovers do not stay open.

One reply per request, as far as HTTP/1.1 allows: bytes that arrive after a reply and before
the connection's next request is written (in the reply's own read, read later by the event
loop, or still in the socket when the connection is taken from the pool: one ``poll`` that
does not wait) close the connection and are never read as a reply; so does the server's
close. What no client can tell apart is an extra reply that arrives only after the next
request is written: it reads as that request's reply (HTTP/1.1 numbers nothing), and the
real one then closes the connection. ``Policy(keep_alive=False)`` sends every request on a
connection of its own (``Connection: close``), which rules that out too.

A reply's head (status line and headers, interim 1xx replies included) is capped at
:data:`MAX_HEAD_BYTES`, counted as its bytes arrive, and so is what may arrive after the head
without a part of the reply ending (a trailer or chunk-size line): memory per exchange is at
most the body cap, the head cap and one read. Names are
resolved once per :data:`DNS_TTL_S` (by the system resolver, in asyncio's executor), and a
new connection races their addresses as aiohttp does (``aiohappyeyeballs``, RFC 8305). What is
not this wire's — a proxy, credentials in the URL — goes to aiohttp's
(:func:`ragbatch.providers._http_wire.open_wire` chooses).
"""

from __future__ import annotations

import asyncio
import select
import socket
import ssl
import zlib
from collections import deque
from collections.abc import Mapping
from urllib.parse import urlsplit

import aiohappyeyeballs
import httptools
from aiohappyeyeballs import AddrInfoType
from multidict import CIMultiDict

from ragbatch.providers._http_codings import content_coding, inflater, transfer_coding
from ragbatch.providers._http_errors import BadReply, BrokenReply, TooLarge
from ragbatch.providers._http_types import USER_AGENT, Policy
from ragbatch.providers._replies import HttpReply

KEEPALIVE_S = 15.0  # an idle connection older than this is closed, not reused
DNS_TTL_S = 10.0  # a name's addresses are looked up again after this
HAPPY_EYEBALLS_S = 0.25  # a name's next address is tried this long after the one before
# The status line and headers together, and what may arrive without a part of the reply
# ending (a header or trailer line, a chunk's size line): llhttp sets no limit, and httptools
# keeps an unfinished header line in memory until it ends.
MAX_HEAD_BYTES = 64 * 1024
_NO_BODY = frozenset({204, 304})


class _Stop(Exception):
    """Raised in a parser callback to stop parsing (the error that stopped it is kept)."""


class Connection(asyncio.Protocol):
    """One keep-alive connection: one exchange at a time, its reply parsed as it arrives."""

    def __init__(self, cap: int, pool: set[Connection]) -> None:
        self.cap, self.pool = cap, pool
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.waiter: asyncio.Future[HttpReply] | None = None
        self.reusable = True
        self.idle_since = 0.0
        self.error: BaseException | None = None
        self.pending = 0  # bytes read since a part of the reply last ended
        self.progressed = False  # whether a part of the reply ended in this read
        self.silence: select.poll | None = None  # polls the socket for bytes while idle
        self._new_reply()

    def _new_reply(self) -> None:
        self.reason = b""
        self.fields: list[tuple[str, str]] = []
        self.head_size = 0
        self.headers: CIMultiDict[str] | None = None
        self.parts: list[bytes] = []
        self.size = 0
        self.coding: str | None = None  # gzip or deflate: decoded as it arrives
        self.decoder: zlib._Decompress | None = None
        self.to_close = False  # the body ends where the connection does

    # --- asyncio.Protocol ----------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.pool.add(self)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            self.silence = select.poll()
            self.silence.register(sock.fileno(), select.POLLIN)

    def data_received(self, data: bytes) -> None:
        waiter = self.waiter
        if waiter is None or waiter.done():  # bytes nobody asked for: never read as a reply
            self.close()
            return
        self.progressed = False
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._fail(BadReply("the server switched protocols"))
            return
        except httptools.HttpParserError as exc:
            self._fail(self.error or BadReply(f"the reply breaks HTTP: {exc}"))
            return
        if self.progressed:
            self.pending = 0
            return
        # Counted as the bytes arrive, not when a line ends: a line that never ends would
        # otherwise grow in memory until the attempt's deadline.
        self.pending += len(data)
        if self.pending > MAX_HEAD_BYTES and not waiter.done():
            what = "head" if self.headers is None else "framing, in one line,"
            self._fail(TooLarge(f"the reply's {what} passed {MAX_HEAD_BYTES} bytes"))

    def eof_received(self) -> bool:
        return False  # close our side too: connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self.reusable = False
        self.pool.discard(self)
        waiter = self.waiter
        if waiter is None or waiter.done():
            return
        if exc is None and self.to_close and self.headers is not None:
            self._finish()  # a body framed by the close is complete now
            if waiter.done():
                return
        detail = f": {exc}" if exc is not None else ""
        waiter.set_exception(BrokenReply(f"the server closed the connection{detail}"))

    # --- httptools callbacks -------------------------------------------------------------

    def on_message_begin(self) -> None:
        if self.waiter is None or self.waiter.done():  # a second reply to one request
            self.reusable = False
            raise _Stop

    def on_status(self, status: bytes) -> None:
        self._count(len(status))
        self.reason += status

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count(len(name) + len(value) + 4)
        self.fields.append((name.decode("latin-1"), value.decode("utf-8", "replace")))

    def on_headers_complete(self) -> None:
        self.progressed = True
        status = self.parser.get_status_code()
        if status < 200:
            return  # an interim reply (100 Continue, 103 Early Hints): the real one follows
        headers = CIMultiDict(self.fields)
        self.headers = headers
        declared = headers.get("Content-Length")
        if declared is not None and declared.isdigit() and int(declared) > self.cap:
            self._stop(TooLarge(f"Content-Length {declared} is over the {self.cap}-byte cap"))
        chunked = "chunked" in headers.get("Transfer-Encoding", "").lower()
        self.to_close = declared is None and not chunked and status not in _NO_BODY
        try:
            self.coding = transfer_coding(headers) or content_coding(headers)
        except BadReply as exc:
            self._stop(exc)

    def on_body(self, data: bytes) -> None:
        self.progressed = True
        decoder, cap = self.decoder, self.cap
        if decoder is None and self.coding is not None and data:
            decoder = self.decoder = inflater(self.coding, data)
        if decoder is not None:
            data = decoder.decompress(data, cap - self.size + 1)
            if decoder.unconsumed_tail:  # more output than the cap allows
                self._stop(TooLarge(f"the decoded body passed the {cap}-byte cap"))
        self.size += len(data)
        if self.size > cap:
            self._stop(TooLarge(f"the decoded body passed the {cap}-byte cap"))
        self.parts.append(data)

    def on_chunk_header(self) -> None:
        self.progressed = True

    def on_chunk_complete(self) -> None:
        self.progressed = True

    def on_message_complete(self) -> None:
        self.progressed = True
        if self.headers is None:  # the end of an interim reply: its head counts on
            head_size = self.head_size
            self._new_reply()
            self.head_size = head_size
            return
        self.reusable = self.reusable and self.parser.should_keep_alive()
        self._finish()

    # --- the exchange --------------------------------------------------------------------

    def _count(self, size: int) -> None:
        self.head_size += size
        if self.head_size > MAX_HEAD_BYTES:
            self._stop(TooLarge(f"the reply's head passed {MAX_HEAD_BYTES} bytes"))

    def _stop(self, error: BaseException) -> None:
        self.error = error
        raise _Stop

    def _finish(self) -> None:
        decoder, headers, waiter = self.decoder, self.headers, self.waiter
        assert headers is not None and waiter is not None
        if decoder is not None and not decoder.eof:  # (no byte at all: an empty body)
            # framed complete, yet cut: the server's; read to a close: maybe a dropped line
            cut = BrokenReply if self.to_close else BadReply
            self._fail(cut("the compressed body ends early"))
            return
        status = self.parser.get_status_code()
        reason = self.reason.decode("latin-1")
        body = self.parts[0] if len(self.parts) == 1 else b"".join(self.parts)
        self._new_reply()
        self.waiter = None  # an idle connection keeps no reply alive
        waiter.set_result(HttpReply(status, reason, headers, body))

    def _fail(self, error: BaseException) -> None:
        self.reusable = False
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(error)
        self.close()

    def send(self, data: bytes, loop: asyncio.AbstractEventLoop) -> asyncio.Future[HttpReply]:
        assert self.transport is not None
        self.error = None
        self.pending = 0
        self.waiter = waiter = loop.create_future()
        if not self.reusable:  # closed since it connected (bytes nobody asked for, a reset)
            waiter.set_exception(BrokenReply("the server closed the connection"))
        else:
            self.transport.write(data)
        return waiter

    def is_silent(self) -> bool:
        """Whether nothing (no byte, no end) has reached the socket since the last reply,
        read or not: one ``poll`` that does not wait. Bytes the event loop has read already
        closed the connection (:meth:`data_received`)."""
        return self.reusable and (self.silence is None or not self.silence.poll(0))

    def expire(self) -> None:
        """The attempt's deadline: the exchange fails as a timeout, the connection closes."""
        self._fail(TimeoutError())

    def close(self) -> None:
        self.reusable = False
        if self.transport is not None:
            self.transport.abort()


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
