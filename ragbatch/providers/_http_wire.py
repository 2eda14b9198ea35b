"""What the two wires under :class:`~ragbatch.providers._http_client.RetryingClient` share,
and which one a client gets (:func:`open_wire`): the project's own HTTP/1.1 connections
(:mod:`ragbatch.providers._http_conn`, llhttp's framing) for a direct ``http://`` or
``https://`` origin, aiohttp's session (:mod:`ragbatch.providers._http_aiohttp`) through a
proxy or with credentials in the URL. Neither is imported before a client is built: a mock
or ``--offline`` run pays for neither.

Here: the body cap's error, the mapping of a wire's errors to the project's failure kinds,
the decoders of a coded body, the proxy the environment names. See
:mod:`ragbatch.providers._http_client` for what each failure kind means, why proxies are read
from the environment here rather than through aiohttp's ``trust_env``, and the cap.
"""

from __future__ import annotations

import socket
import urllib.request
import zlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol
from urllib.parse import urlsplit

from ragbatch.providers._http_client import RESPONSE_TOO_LARGE_KIND

if TYPE_CHECKING:
    from ragbatch.providers._http_client import Policy
    from ragbatch.providers._replies import HttpReply

USER_AGENT = "ragbatch"  # the aiohttp wire adds its version


class TooLarge(Exception):
    """The reply's body is over the cap (declared or decoded)."""


class BrokenReply(ConnectionError):
    """The server closed the connection before a complete reply, or the reply breaks HTTP."""


class Wire(Protocol):
    """One origin's exchanges: a POST's reply, or one of :attr:`errors`."""

    errors: tuple[type[BaseException], ...]

    async def post(self, path: str, body: bytes, headers: Mapping[str, str]) -> HttpReply: ...

    async def aclose(self) -> None: ...


def open_wire(base_url: str, policy: Policy) -> Wire:
    """The wire for ``base_url``: the project's own connections, or aiohttp's session where
    there is a proxy to go through or credentials in the URL."""
    url = canonical_url(base_url.rstrip("/"))
    parts = urlsplit(url)
    proxy = proxy_for(url)
    direct = (
        parts.scheme in ("http", "https")
        and parts.hostname is not None
        and not (parts.username or parts.password or parts.query or parts.fragment)
        and parts.path.isascii()
        and proxy is None
    )
    if direct:
        from ragbatch.providers._http_conn import ConnWire

        return ConnWire(url, policy)
    from ragbatch.providers._http_aiohttp import AiohttpWire

    return AiohttpWire(url, policy, proxy)


def failure_kind(exc: BaseException) -> str:
    """The project's failure kind of one of a wire's :attr:`~Wire.errors`: ``timeout``,
    ``response-too-large``, else ``connection`` (refused, reset, TLS, :class:`BrokenReply`,
    aiohttp's client errors)."""
    if isinstance(exc, TimeoutError):  # aiohttp's timeouts subclass it too
        return "timeout"
    if isinstance(exc, TooLarge):
        return RESPONSE_TOO_LARGE_KIND
    return "connection"


def proxy_for(base_url: str) -> str | None:
    """The proxy the environment names for ``base_url`` (None: connect directly)."""
    parts = urlsplit(base_url)
    if parts.hostname is None or urllib.request.proxy_bypass(parts.hostname):
        return None
    return urllib.request.getproxies().get(parts.scheme)


def canonical_url(base_url: str) -> str:
    """``base_url`` with a legacy IPv4 spelling (``2130706433``, ``127.1``, ``0x7f.1``) of its
    host written the usual way: the system resolver accepts those spellings, aiohttp's URL
    type refuses them."""
    parts = urlsplit(base_url)
    host = parts.hostname
    if host is None or (host.count(".") == 3 and host.replace(".", "").isdigit()):
        return base_url
    try:
        address = socket.inet_ntoa(socket.inet_aton(host))
    except OSError:
        return base_url  # a name, or an IPv6 address
    netloc = address if parts.port is None else f"{address}:{parts.port}"
    return parts._replace(netloc=netloc).geturl()


def transfer_coding(headers: Mapping[str, str]) -> str | None:
    """The coding of a ``Transfer-Encoding: gzip, chunked`` (or deflate) body, which aiohttp
    leaves coded (it decodes ``Content-Encoding`` only); None when only chunked or none."""
    field = headers.get("Transfer-Encoding")
    if field is None:
        return None
    codings = [c.strip().lower() for c in field.split(",")]
    codings = [c for c in codings if c not in ("chunked", "identity", "")]
    if not codings:
        return None
    if codings not in (["gzip"], ["x-gzip"], ["deflate"]) or "Content-Encoding" in headers:
        raise BrokenReply(f"unsupported Transfer-Encoding {field[:40]!r}")
    return codings[0]


def content_coding(headers: Mapping[str, str]) -> str | None:
    """The coding of a ``Content-Encoding: gzip`` (or deflate) body, the two a request
    accepts; None for none or identity."""
    field = headers.get("Content-Encoding")
    if field is None:
        return None
    coding = field.strip().lower()
    if coding in ("", "identity"):
        return None
    if coding in ("gzip", "x-gzip", "deflate"):
        return coding
    raise BrokenReply(f"unsupported Content-Encoding {field[:40]!r}")


def inflater(coding: str, first: bytes) -> zlib._Decompress:
    """A decoder for a body in ``coding`` that starts with ``first``: gzip, zlib, or the raw
    deflate stream some servers send as ``deflate`` (no zlib header), as aiohttp reads it."""
    if coding == "deflate" and first and first[0] & 0x0F != zlib.DEFLATED:
        return zlib.decompressobj(-zlib.MAX_WBITS)
    return zlib.decompressobj(zlib.MAX_WBITS | 32)  # gzip or zlib, by the stream's header
