"""An httpx transport that speaks HTTP/1.1 itself over anyio streams: one keep-alive
connection per call in flight, reused LIFO (async I/O).

Why not httpx's own pool: httpcore 1.0's ``AsyncConnectionPool`` rescans every connection for
every queued request on every request and response event (0.07 of ideal throughput at 128
connections, 200 ms latency). httpcore2 (the httpx2 fork) makes that scan O(N+M), but the scan
still asks every idle connection whether it expired, a socket poll each, on every event: at
concurrency 256 httpx2 spent more CPU per call than this transport's predecessor, 256
single-connection httpcore pools (``bench/bench_ceiling.py``, README "Performance"). Those
lanes in turn cost ~0.5 ms of CPU per call in httpcore, h11 and its locks: more than the rest
of a row. This transport keeps the client above it (one ``httpx.AsyncClient``: URLs, headers,
auth, decoding, the exception tree) and does the wire work in a few lines per call.

Scope, which is what the Jev and chat clients need: HTTP/1.1 over TCP or TLS (one SSL
context for all connections), no proxies (an explicit transport never used them), bodies
framed by Content-Length, chunked or read to close, each read whole before the response is
returned (replies are small). The connect timeout bounds the connect, the read timeout the whole
exchange, or a ``deadline`` extension (anyio's clock) the whole call, connect included (what
:class:`LeanClient` sets: one cancel scope a call on a kept-alive connection); failures raise httpx's own exceptions, so callers see the httpx API unchanged.
"""

from __future__ import annotations

import select
import socket
import ssl
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol

import anyio
import httpx
from anyio.abc import SocketAttribute
from anyio.streams.buffered import BufferedByteStream

MAX_HEAD_BYTES = 64 * 1024
KEEPALIVE_EXPIRY_S = 5.0  # httpx's default: an idle connection older than this is closed
NO_BODY_STATUSES = frozenset({204, 304})
_IO_ERRORS = (
    OSError,
    ssl.SSLError,
    anyio.BrokenResourceError,
    anyio.ClosedResourceError,
    anyio.EndOfStream,
    anyio.IncompleteRead,
)
Origin = tuple[bytes, str, int]


@contextmanager
def _mapped(
    timeout: type[httpx.TimeoutException],
    error: type[httpx.TransportError],
    request: httpx.Request,
    seconds: float | None,
    deadline: float | None = None,
) -> Iterator[None]:
    """Run the block within ``seconds`` and by ``deadline`` (anyio's clock) if given;
    anyio/OS failures become httpx exceptions."""
    if deadline is not None and seconds is not None:
        deadline = min(deadline, anyio.current_time() + seconds)
    try:
        with anyio.fail_at(deadline) if deadline is not None else anyio.fail_after(seconds):
            yield
    except TimeoutError:
        raise timeout("timed out", request=request) from None
    except anyio.DelimiterNotFound:
        raise httpx.RemoteProtocolError("response head too large", request=request) from None
    except _IO_ERRORS as exc:
        message = str(exc) or "server disconnected without sending a complete response"
        raise error(message, request=request) from exc


class _Connection:
    __slots__ = ("idle_since", "sock", "stream")

    def __init__(self, stream: BufferedByteStream, sock: socket.socket | None) -> None:
        self.stream = stream
        self.sock = sock
        self.idle_since = 0.0

    def is_reusable(self, now: float) -> bool:
        """Idle, not expired and not closed by the server (no EOF or stray bytes waiting)."""
        if now - self.idle_since > KEEPALIVE_EXPIRY_S:
            return False
        sock = self.sock
        if sock is None:
            return True
        if sock.fileno() < 0:  # the event loop already saw the server close it
            return False
        return not _is_readable(sock)


def _is_readable(sock: socket.socket) -> bool:
    """Whether bytes or an EOF wait on ``sock`` (poll: select() fails past fd 1023)."""
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(sock, select.POLLIN)
        return bool(poller.poll(0))
    readable, _, _ = select.select([sock], [], [], 0)  # Windows
    return bool(readable)


def _head(request: httpx.Request, body: bytes, chunked: bool) -> bytes:
    lines = [b"%s %s HTTP/1.1\r\n" % (request.method.encode(), request.url.raw_path)]
    lines.extend(b"%s: %s\r\n" % (name, value) for name, value in request.headers.raw)
    lines.append(b"\r\n")
    if chunked:  # a streamed body httpx could not size: sent as one chunk
        lines.append(b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body) if body else b"0\r\n\r\n")
    else:
        lines.append(body)
    return b"".join(lines)


def _parse_head(head: bytes) -> tuple[bytes, int, bytes, list[tuple[bytes, bytes]]]:
    status_line, *header_lines = head.split(b"\r\n")
    version, _, rest = status_line.partition(b" ")
    code, _, reason = rest.partition(b" ")
    if not version.startswith(b"HTTP/1.") or len(code) != 3 or not code.isdigit():
        raise httpx.RemoteProtocolError(f"malformed status line {status_line[:80]!r}")
    headers = []
    for line in header_lines:
        name, sep, value = line.partition(b":")
        if not sep or not name or name != name.strip():
            raise httpx.RemoteProtocolError(f"malformed header line {line[:80]!r}")
        headers.append((name, value.strip()))
    return version, int(code), reason, headers


class FanOutTransport(httpx.AsyncBaseTransport):
    """One keep-alive connection per call in flight, opened on demand, reused LIFO."""

    def __init__(self) -> None:
        # One SSL context for every connection: building one loads the CA bundle (~20 ms).
        self._ssl: ssl.SSLContext | None = None
        self._idle: dict[Origin, list[_Connection]] = {}
        self._open: set[_Connection] = set()

    @property
    def connections(self) -> int:
        """Connections open now (idle or carrying a call)."""
        return len(self._open)

    async def _connect(self, origin: Origin, request: httpx.Request) -> _Connection:
        scheme, host, port = origin
        timeouts = request.extensions.get("timeout", {})
        tls = scheme == b"https"
        if tls and self._ssl is None:
            self._ssl = httpx.create_ssl_context()
        deadline = request.extensions.get("deadline")
        connect = timeouts.get("connect")
        with _mapped(httpx.ConnectTimeout, httpx.ConnectError, request, connect, deadline):
            if tls:
                stream: anyio.abc.ByteStream = await anyio.connect_tcp(
                    host, port, ssl_context=self._ssl, tls_hostname=host
                )
            else:  # (a TLS hostname alone would make anyio do TLS)
                stream = await anyio.connect_tcp(host, port)
        sock = stream.extra(SocketAttribute.raw_socket, None)
        connection = _Connection(BufferedByteStream(stream), sock)
        self._open.add(connection)
        return connection

    async def _take(self, origin: Origin, request: httpx.Request) -> _Connection:
        idle = self._idle.get(origin)
        now = time.monotonic()
        while idle:
            connection = idle.pop()
            if connection.is_reusable(now):
                return connection
            await self._discard(connection)
        return await self._connect(origin, request)

    async def _discard(self, connection: _Connection) -> None:
        self._open.discard(connection)
        await anyio.aclose_forcefully(connection.stream)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        if url.scheme not in ("http", "https"):
            raise httpx.UnsupportedProtocol(f"unsupported URL scheme {url.scheme!r}")
        port = url.port or (443 if url.scheme == "https" else 80)
        origin: Origin = (url.raw_scheme, url.host, port)
        body = await request.aread()
        chunked = request.headers.get("transfer-encoding", "").lower() == "chunked"
        connection = await self._take(origin, request)
        try:
            response, reusable = await self._exchange(connection, request, body, chunked)
        except BaseException:
            await self._discard(connection)  # its state is unknown: never reused
            raise
        if reusable:
            connection.idle_since = time.monotonic()
            self._idle.setdefault(origin, []).append(connection)
        else:
            await self._discard(connection)
        return response

    async def _exchange(
        self, connection: _Connection, request: httpx.Request, body: bytes, chunked: bool
    ) -> tuple[httpx.Response, bool]:
        # One deadline for the whole exchange (the read timeout, as large as the write one
        # or larger in every client here): a scope per read would cost more than the read.
        timeouts = request.extensions.get("timeout", {})
        seconds = max((t for t in (timeouts.get("write"), timeouts.get("read")) if t), default=None)
        stream = connection.stream
        deadline = request.extensions.get("deadline")  # the whole call's, connect included
        if deadline is not None:
            seconds = None
        with _mapped(httpx.ReadTimeout, httpx.RemoteProtocolError, request, seconds, deadline):
            await stream.send(_head(request, body, chunked))
            while True:
                head = await stream.receive_until(b"\r\n\r\n", MAX_HEAD_BYTES)
                version, status, reason, headers = _parse_head(head)
                if not 100 <= status < 200:
                    break  # 1xx (100 Continue, 103 Early Hints) precede the real response
            fields = {name.lower(): value for name, value in headers}
            keep = fields.get(b"connection", b"").lower()
            close = (
                keep == b"close"
                or (version == b"HTTP/1.0" and keep != b"keep-alive")
                or request.headers.get("connection", "").lower() == "close"
            )
            if request.method == "HEAD" or status in NO_BODY_STATUSES:
                content = b""
            elif fields.get(b"transfer-encoding", b"").lower().endswith(b"chunked"):
                content = await self._read_chunked(stream)
            elif (length := fields.get(b"content-length")) is not None:
                if not length.isdigit():
                    raise httpx.RemoteProtocolError(f"bad content-length {length[:40]!r}")
                content = await stream.receive_exactly(int(length)) if int(length) else b""
            else:  # framed by the end of the connection
                content, close = await self._read_to_close(stream), True
        response = httpx.Response(
            status,
            headers=headers,
            stream=httpx.ByteStream(content),
            extensions={"http_version": version, "reason_phrase": reason},
        )
        return response, not close

    @staticmethod
    async def _read_chunked(stream: BufferedByteStream) -> bytes:
        parts: list[bytes] = []
        while True:
            size_line = await stream.receive_until(b"\r\n", MAX_HEAD_BYTES)
            size_text = size_line.split(b";", 1)[0].strip()
            try:
                size = int(size_text, 16)
            except ValueError:
                raise httpx.RemoteProtocolError(f"bad chunk size {size_text[:20]!r}") from None
            if size == 0:
                while await stream.receive_until(b"\r\n", MAX_HEAD_BYTES):
                    pass  # trailers, ignored
                return b"".join(parts)
            parts.append(await stream.receive_exactly(size))
            if await stream.receive_exactly(2) != b"\r\n":
                raise httpx.RemoteProtocolError("chunk not followed by CRLF")

    @staticmethod
    async def _read_to_close(stream: BufferedByteStream) -> bytes:
        parts: list[bytes] = []
        while True:
            try:
                parts.append(await stream.receive())
            except anyio.EndOfStream:
                return b"".join(parts)

    async def aclose(self) -> None:
        for connection in list(self._open):
            await self._discard(connection)
        self._idle.clear()


class HttpClient(Protocol):
    """What the providers call on their HTTP client (``httpx.AsyncClient`` has it too)."""

    async def post(
        self, url: str, *, content: bytes, headers: dict[str, str] | None = None
    ) -> httpx.Response: ...

    async def aclose(self) -> None: ...


class LeanClient:
    """What the providers use of ``httpx.AsyncClient`` (``post``, ``aclose``), sent straight to
    a :class:`FanOutTransport`: no per-call URL merging, cookie jar, auth flow, redirects or
    event hooks (none of which the providers use). Requests and responses are httpx's own.
    ``timeout`` bounds each ``post`` as a whole, connect and reply included
    (:attr:`whole_call_s`), so a caller needs no deadline of its own around it."""

    def __init__(
        self,
        base_url: str,
        timeout: float,
        user_agent: str = f"ragbatch python-httpx/{httpx.__version__}",
    ) -> None:
        self.base_url = httpx.URL(base_url)
        self.transport = FanOutTransport()
        self._timeout = httpx.Timeout(timeout).as_dict()
        self.whole_call_s = timeout
        self._urls: dict[str, httpx.URL] = {}
        self._headers = [
            (b"Host", self.base_url.netloc),
            (b"Accept", b"*/*"),
            (b"Accept-Encoding", b"gzip, deflate"),
            (b"Connection", b"keep-alive"),
            (b"User-Agent", user_agent.encode()),
        ]

    def _url(self, path: str) -> httpx.URL:
        url = self._urls.get(path)
        if url is None:
            base = self.base_url.raw_path.rstrip(b"/").decode("ascii")
            url = self._urls[path] = self.base_url.copy_with(raw_path=(base + path).encode())
        return url

    async def post(
        self, url: str, *, content: bytes, headers: dict[str, str] | None = None
    ) -> httpx.Response:
        fields = list(self._headers)
        fields.extend((name.encode(), value.encode()) for name, value in (headers or {}).items())
        fields.append((b"Content-Length", b"%d" % len(content)))
        # The headers and the body stream given whole: httpx then adds and encodes nothing.
        request = httpx.Request(
            "POST",
            self._url(url),
            headers=fields,
            stream=httpx.ByteStream(content),
            extensions={
                "timeout": self._timeout,
                "deadline": anyio.current_time() + self.whole_call_s,
            },
        )
        response = await self.transport.handle_async_request(request)
        response.request = request
        await response.aread()
        return response

    async def aclose(self) -> None:
        await self.transport.aclose()
