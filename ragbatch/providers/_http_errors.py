"""The errors a wire raises besides the standard library's and aiohttp's, and the one mapping
of a wire's errors to the project's failure kinds (:func:`failure_kind`; no I/O, a leaf).
See :mod:`ragbatch.providers._http_client` for what each kind means to a run.
"""

from __future__ import annotations

import ssl

RESPONSE_TOO_LARGE_KIND = "response-too-large"
BAD_REPLY_KIND = "invalid-http-response"
# Not a row's kind: the client stops the run on it, as on a rejected key.
CERTIFICATE_KIND = "certificate-rejected"


class TooLarge(Exception):
    """The reply is over a cap: its body (declared or decoded) over ``max_response_bytes``,
    or its head, or one line of its framing, over 64 KiB."""


class BrokenReply(ConnectionError):
    """The server closed the connection before a complete reply: the same request may well
    get one on another connection."""


class ProxyError(ConnectionError):
    """The proxy the environment names could not be reached, or refused the tunnel: the
    message names it (without its credentials) and the variable that named it."""


class BadReply(Exception):
    """The reply breaks HTTP: a framing llhttp (or aiohttp) refuses, a coding the request did
    not accept, a compressed body that ends before its stream does. The server's doing, so the
    same request would get the same reply: never retried."""


def failure_kind(exc: BaseException) -> str:
    """The project's failure kind of one of a wire's errors: ``timeout``,
    ``response-too-large``, ``invalid-http-response`` (:class:`BadReply`), ``certificate-rejected``
    (the server's TLS certificate failed verification), else ``connection`` (refused, reset,
    other TLS failures, :class:`BrokenReply`, aiohttp's client errors)."""
    if isinstance(exc, TimeoutError):  # aiohttp's timeouts subclass it too
        return "timeout"
    if isinstance(exc, TooLarge):
        return RESPONSE_TOO_LARGE_KIND
    if isinstance(exc, BadReply):
        return BAD_REPLY_KIND
    if isinstance(exc, ssl.SSLCertVerificationError):
        return CERTIFICATE_KIND
    return "connection"


__all__ = [
    "BAD_REPLY_KIND",
    "CERTIFICATE_KIND",
    "RESPONSE_TOO_LARGE_KIND",
    "BadReply",
    "BrokenReply",
    "ProxyError",
    "TooLarge",
    "failure_kind",
]
