"""One keep-alive HTTP/1.1 connection of the default wire, as an ``asyncio.Protocol``: the
request goes out as given, the reply is framed by llhttp (the parser of Node.js and uvicorn,
through httptools) as it arrives (async I/O). The framing — status line, headers,
``Content-Length``, chunked, a body read to the close, interim 1xx replies, HTTP/1.0 and
``Connection: close`` — is llhttp's; what is written here is what is left around it:
decoding under the body cap, the head cap, and what ends an exchange (a reply, a failure, the
attempt's deadline). The pool of these is :class:`~ragbatch.providers._http_conn.ConnWire`.

One exchange at a time (no pipelining). A reply's head (status line and headers, interim 1xx
replies included) is capped at :data:`MAX_HEAD_BYTES`, counted as its bytes arrive, and so is
what may arrive after the head without a part of the reply ending (a trailer or chunk-size
line): memory per exchange is at most the body cap, the head cap and one read. Bytes that
arrive while no request waits for a reply (a second reply, stray bytes) close the connection;
:meth:`Connection.is_silent` tells whether any reached the socket unread since the last reply.
"""

from __future__ import annotations

import asyncio
import select
import zlib

import httptools
from multidict import CIMultiDict

from ragbatch.providers._http_codings import content_coding, inflater, transfer_coding
from ragbatch.providers._http_errors import BadReply, BrokenReply, TooLarge
from ragbatch.providers._replies import HttpReply

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
            what = "the reply's head" if self.headers is None else "a trailer or chunk line"
            self._fail(TooLarge(f"{what} passed {MAX_HEAD_BYTES} bytes"))

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
