"""Which wire a client gets (:func:`open_wire`): the project's own HTTP/1.1 connections
(:mod:`ragbatch.providers._http_conn`, llhttp's framing) for a direct ``http://`` or
``https://`` origin, aiohttp's session (:mod:`ragbatch.providers._http_aiohttp`) through a
proxy or with credentials in the URL. Neither wire is imported before a client is built: a
mock or ``--offline`` run pays for neither.

The factory is the only module that imports both wires; what they share lives in leaves they
import (:mod:`~ragbatch.providers._http_types`, :mod:`~ragbatch.providers._http_errors`,
:mod:`~ragbatch.providers._http_codings`, :mod:`~ragbatch.providers._http_proxy`), so no
module of the HTTP layer imports one that imports it back.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from ragbatch.providers._http_proxy import canonical_url, find_proxy, proxy_for
from ragbatch.providers._http_types import Policy, Wire


def open_wire(base_url: str, policy: Policy) -> Wire:
    """The wire for ``base_url``: the project's own connections, or aiohttp's session where
    there is a proxy to go through or credentials in the URL."""
    url = canonical_url(base_url.rstrip("/"))
    parts = urlsplit(url)
    proxy = find_proxy(url)
    direct = (
        parts.scheme in ("http", "https")
        and parts.hostname is not None
        and not (parts.username or parts.password or parts.query or parts.fragment)
        and parts.path.isascii()
        and proxy is None
    )
    if direct:
        from ragbatch.providers._http_conn import ConnWire  # the wires: when needed

        return ConnWire(url, policy)
    from ragbatch.providers._http_aiohttp import AiohttpWire

    return AiohttpWire(url, policy, proxy)


__all__ = ["canonical_url", "open_wire", "proxy_for"]
