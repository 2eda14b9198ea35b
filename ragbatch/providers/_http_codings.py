"""The codings a reply's body may come in and their decoders, for both wires (no I/O, a
leaf): ``gzip`` and ``deflate`` (raw deflate too), as ``Content-Encoding`` or as a
``Transfer-Encoding`` before ``chunked``; anything else breaks the reply."""

from __future__ import annotations

import zlib
from collections.abc import Mapping

from ragbatch.providers._http_errors import BadReply


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
        raise BadReply(f"unsupported Transfer-Encoding {field[:40]!r}")
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
    raise BadReply(f"unsupported Content-Encoding {field[:40]!r}")


def inflater(coding: str, first: bytes) -> zlib._Decompress:
    """A decoder for a body in ``coding`` that starts with ``first``: gzip, zlib, or the raw
    deflate stream some servers send as ``deflate`` (no zlib header), as aiohttp reads it."""
    if coding == "deflate" and first and first[0] & 0x0F != zlib.DEFLATED:
        return zlib.decompressobj(-zlib.MAX_WBITS)
    return zlib.decompressobj(zlib.MAX_WBITS | 32)  # gzip or zlib, by the stream's header


__all__ = ["content_coding", "inflater", "transfer_coding"]
