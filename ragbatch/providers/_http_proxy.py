"""Where a request for a base URL goes: through the proxy the environment names, or directly;
and the base URL written the usual way (no I/O but reading the environment; a leaf).

The environment is read as curl and requests read it, which the standard library does only
in part: ``<scheme>_proxy`` then ``all_proxy`` (either case, lower case first; an upper-case
``HTTP_PROXY`` is ignored under CGI, as :func:`urllib.request.getproxies` ignores it), and
``no_proxy`` entries that are names (``example.com`` also covers its subdomains, a leading
``.`` or ``*.`` changes nothing), IP addresses, CIDR blocks (``10.0.0.0/8``), any of them
with a ``:port`` that must then match, or ``*``. :func:`urllib.request.proxy_bypass` ignores
ports, CIDR blocks and ``ALL_PROXY``, and requests and httpx are not dependencies; so this
module reads them itself. A loopback host (``localhost``, ``127.0.0.0/8``, ``::1``) is never
proxied, as Go's net/http does: a key sent over plain ``http://`` to loopback (which needs
no ``--allow-insecure-http``) must not travel in clear to a proxy. Where the environment
names no proxy at all, the system's settings apply (:func:`urllib.request.getproxies`:
macOS, Windows).
"""

from __future__ import annotations

import ipaddress
import os
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

from ragbatch.providers._apikey import is_loopback_host

DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True)
class Proxy:
    """A proxy to go through: its URL (credentials and all) and where it was named."""

    url: str
    source: str  # "HTTPS_PROXY", "all_proxy", "the system's proxy settings"

    def __str__(self) -> str:
        """The proxy without its credentials, and where it was named: for messages."""
        parts = urlsplit(self.url)
        host = parts.hostname or ""
        host = f"[{host}]" if ":" in host else host
        port = f":{parts.port}" if parts.port is not None else ""
        return f"{parts.scheme}://{host}{port} (from {self.source})"


def _variable(name: str) -> tuple[str, str] | None:
    """The environment's ``name`` variable (lower case first, then upper case): its name and
    value, or None when unset or empty (an empty lower-case one hides the upper-case one)."""
    lower, upper = name.lower(), name.upper()
    if lower in os.environ:
        value = os.environ[lower]
        return (lower, value) if value else None
    if upper == "HTTP_PROXY" and "REQUEST_METHOD" in os.environ:
        return None  # set from a client's "Proxy:" header under CGI (httpoxy)
    value = os.environ.get(upper, "")
    return (upper, value) if value else None


def _split_entry(entry: str) -> tuple[str, int | None]:
    """A ``no_proxy`` entry's host (or network) and port, if it names one."""
    if entry.startswith("["):  # [v6] or [v6]:port
        host, _, rest = entry[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
        return host, int(port) if port.isdigit() else None
    if entry.count(":") == 1:  # name:port or v4:port (an IPv6 address has more colons)
        host, _, port = entry.partition(":")
        return host, int(port) if port.isdigit() else None
    return entry, None


def _matches(entry: str, host: str, port: int) -> bool:
    entry_host, entry_port = _split_entry(entry)
    if entry_port is not None and entry_port != port:
        return False
    entry_host = entry_host.removeprefix("*").lstrip(".").rstrip(".")
    try:
        address = ipaddress.ip_address(host)
    except ValueError:  # a name: the entry's name or one of its subdomains
        return bool(entry_host) and (host == entry_host or host.endswith("." + entry_host))
    try:
        return address in ipaddress.ip_network(entry_host, strict=False)
    except ValueError:  # a name entry never covers an address
        return False


def is_bypassed(host: str, port: int, no_proxy: str) -> bool:
    """Whether ``no_proxy`` (comma- or space-separated entries) says to reach ``host:port``
    directly."""
    host = host.lower().rstrip(".")
    entries = no_proxy.replace(",", " ").lower().split()
    return any(entry == "*" or _matches(entry, host, port) for entry in entries)


def find_proxy(base_url: str) -> Proxy | None:
    """The proxy to reach ``base_url`` through, or None to connect directly."""
    parts = urlsplit(base_url)
    host, scheme = parts.hostname, parts.scheme.lower()
    if host is None or is_loopback_host(host):
        return None
    names = [f"{scheme}_proxy", "all_proxy"]
    if not any(k.lower().endswith("_proxy") for k in os.environ):
        import urllib.request  # the system's settings; ~10 ms to import, so only here

        system = urllib.request.getproxies()
        url = system.get(scheme) or system.get("all")
        if url is None or urllib.request.proxy_bypass(host):
            return None
        return Proxy(url, "the system's proxy settings")
    no_proxy = _variable("no_proxy")
    port = parts.port or DEFAULT_PORTS.get(scheme, 0)
    if no_proxy is not None and is_bypassed(host, port, no_proxy[1]):
        return None
    for name in names:
        found = _variable(name)
        if found is not None:
            return Proxy(found[1], found[0])
    return None


def proxy_for(base_url: str) -> str | None:
    """The URL of the proxy to reach ``base_url`` through (None: connect directly)."""
    proxy = find_proxy(base_url)
    return None if proxy is None else proxy.url


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


__all__ = ["Proxy", "canonical_url", "find_proxy", "is_bypassed", "proxy_for"]
