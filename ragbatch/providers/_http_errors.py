"""The errors a wire raises besides the standard library's and aiohttp's, and the one mapping
of a wire's errors to the project's failure kinds (:func:`failure_kind`; no I/O, a leaf).
See :mod:`ragbatch.providers._http_client` for what each kind means to a run.
"""

from __future__ import annotations

RESPONSE_TOO_LARGE_KIND = "response-too-large"


class TooLarge(Exception):
    """The reply's body is over the cap (declared or decoded)."""


class BrokenReply(ConnectionError):
    """The server closed the connection before a complete reply, or the reply breaks HTTP."""


def failure_kind(exc: BaseException) -> str:
    """The project's failure kind of one of a wire's errors: ``timeout``,
    ``response-too-large``, else ``connection`` (refused, reset, TLS, :class:`BrokenReply`,
    aiohttp's client errors)."""
    if isinstance(exc, TimeoutError):  # aiohttp's timeouts subclass it too
        return "timeout"
    if isinstance(exc, TooLarge):
        return RESPONSE_TOO_LARGE_KIND
    return "connection"


__all__ = ["RESPONSE_TOO_LARGE_KIND", "BrokenReply", "TooLarge", "failure_kind"]
