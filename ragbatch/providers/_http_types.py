"""What the retrying client and both wires share, and nothing of theirs: the client's
:class:`Policy` and the :class:`Wire` protocol (no I/O; imports only the reply type).

A leaf: the client (:mod:`ragbatch.providers._http_client`), the factory that picks a wire
(:mod:`ragbatch.providers._http_wire`) and the wires themselves import it, and it imports none
of them, so no two of those modules import each other.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from ragbatch.providers._replies import HttpReply

DEFAULT_MAX_RESPONSE_BYTES = 16 * 1024 * 1024
USER_AGENT = "ragbatch"  # the aiohttp wire adds its version


@dataclass(frozen=True)
class Policy:
    """Timeouts, retries and limits of one client (defaults follow the official SDK)."""

    attempt_timeout_s: float = 30.0
    row_deadline_s: float | None = None  # all attempts and waits of one call together
    max_retries: int = 4
    backoff_initial_s: float = 0.5
    backoff_max_s: float = 5.0
    retry_after_cap_s: float = 60.0
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES
    verify: bool | str = True  # TLS: system CAs, no check, or a CA bundle's path
    keep_alive: bool = True  # False: one connection per request (no reply can go astray)


class Wire(Protocol):
    """One origin's exchanges: a POST's reply, or one of :attr:`errors`."""

    errors: tuple[type[BaseException], ...]

    async def post(self, path: str, body: bytes, headers: Mapping[str, str]) -> HttpReply: ...

    async def aclose(self) -> None: ...


__all__ = ["DEFAULT_MAX_RESPONSE_BYTES", "USER_AGENT", "Policy", "Wire"]
