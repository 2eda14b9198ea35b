"""Where a request for a base URL goes: through the proxy the environment names, or directly;
and the base URL written the usual way (no I/O but reading the environment; a leaf)."""

from __future__ import annotations

import socket
import urllib.request
from urllib.parse import urlsplit


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


__all__ = ["canonical_url", "proxy_for"]
