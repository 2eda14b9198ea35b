"""The wire under :class:`~ragbatch.providers._http_client.RetryingClient`: one aiohttp
session, the body cap, and the mapping of aiohttp's errors to the project's failure kinds
(async I/O). Imported only when a client is built: aiohttp takes a tenth of a second to
import, which a mock or ``--offline`` run does not need to pay.

See :mod:`ragbatch.providers._http_client` for what each failure kind means, why proxies are
read from the environment here rather than through aiohttp's ``trust_env``, and the cap.
"""

from __future__ import annotations

import socket
import ssl
import urllib.request
import zlib
from collections.abc import Mapping
from urllib.parse import urlsplit

import aiohttp

from ragbatch.providers._http_client import RESPONSE_TOO_LARGE_KIND, Policy
from ragbatch.providers._replies import HttpReply

USER_AGENT = f"ragbatch aiohttp/{aiohttp.__version__}"


class TooLarge(Exception):
    """The reply's body is over the cap (declared or decoded)."""


def failure_kind(exc: BaseException) -> str | None:
    """The project's failure kind of an aiohttp/OS error, or None if it is not one."""
    if isinstance(exc, TimeoutError):  # aiohttp's timeouts subclass it too
        return "timeout"
    if isinstance(exc, TooLarge):
        return RESPONSE_TOO_LARGE_KIND
    if isinstance(exc, aiohttp.ClientError | OSError | ssl.SSLError):
        return "connection"
    return None


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


def _transfer_decoder(headers: Mapping[str, str]) -> zlib._Decompress | None:
    """A decoder for a ``Transfer-Encoding: gzip, chunked`` (or deflate) body, which aiohttp
    leaves coded (it decodes ``Content-Encoding`` only); None when only chunked or none."""
    field = headers.get("Transfer-Encoding")
    if field is None:
        return None
    codings = [c.strip().lower() for c in field.split(",")]
    codings = [c for c in codings if c not in ("chunked", "identity", "")]
    if not codings:
        return None
    if codings not in (["gzip"], ["x-gzip"], ["deflate"]) or "Content-Encoding" in headers:
        raise aiohttp.ClientPayloadError(f"unsupported Transfer-Encoding {field[:40]!r}")
    return zlib.decompressobj(zlib.MAX_WBITS | 32)  # gzip or zlib, by the stream's header


def _ssl(verify: bool | str) -> ssl.SSLContext | bool:
    if verify is False:
        return False
    if verify is True:
        return True  # aiohttp's default context (built once per connector)
    return ssl.create_default_context(cafile=verify)


class Wire:
    """POST over one aiohttp session (opened on first use, inside the event loop)."""

    def __init__(self, base_url: str, policy: Policy) -> None:
        self.base_url = canonical_url(base_url.rstrip("/"))
        self.policy = policy
        self.proxy = proxy_for(self.base_url)
        self._session: aiohttp.ClientSession | None = None
        self._timeout = aiohttp.ClientTimeout(total=policy.attempt_timeout_s)

    def _open(self) -> aiohttp.ClientSession:
        connector = aiohttp.TCPConnector(limit=0, ssl=_ssl(self.policy.verify))
        self._session = aiohttp.ClientSession(
            connector=connector,
            timeout=self._timeout,
            headers={"User-Agent": USER_AGENT},
            trust_env=False,  # proxies: see the module docstring
        )
        return self._session

    async def post(self, path: str, body: bytes, headers: Mapping[str, str]) -> HttpReply:
        """One exchange; aiohttp's errors (and :class:`TooLarge`) as they come."""
        session = self._session or self._open()
        cap = self.policy.max_response_bytes
        async with session.post(
            self.base_url + path,
            data=body,
            headers=headers,
            allow_redirects=False,
            proxy=self.proxy,
        ) as response:
            declared = response.content_length
            if declared is not None and declared > cap:
                raise TooLarge(f"Content-Length {declared} is over the {cap}-byte cap")
            inflate = _transfer_decoder(response.headers)
            parts: list[bytes] = []
            size = 0
            async for part in response.content.iter_any():  # decoded, in bounded pieces
                if inflate is not None:
                    part = inflate.decompress(part, cap - size + 1)
                    if inflate.unconsumed_tail:  # more output than the cap allows
                        size = cap
                size += len(part)
                if size > cap:
                    raise TooLarge(f"the decoded body passed the {cap}-byte cap")
                parts.append(part)
            if inflate is not None and not inflate.eof:
                raise aiohttp.ClientPayloadError("transfer-coded body ends early")
            body = b"".join(parts)
            return HttpReply(response.status, response.reason or "", response.headers, body)

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


# What one exchange may raise besides a reply: each becomes a failure kind (failure_kind).
WIRE_ERRORS = (aiohttp.ClientError, OSError, TimeoutError, TooLarge)
