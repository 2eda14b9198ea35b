"""The Phoenix server's own REST API, as ``ragbatch watch`` uses it (async I/O, aiohttp).

- ``GET /v1/projects/{project}/spans?sort=id&order=asc&cursor=..&limit=..``: spans in the
  order Phoenix stored them. A span's ``id`` is Phoenix's row id (a Relay global id,
  ``base64("Span:<n>")``); a span that arrives late still gets a larger one, so an id cursor
  misses nothing (a start-time cursor would). The cursor is inclusive: the page starting at
  a span's id holds that span first, which the watcher skips (:func:`span_number`).
  ``start_time`` (inclusive) bounds the spans' start times.
- ``POST /v1/span_annotations?sync=true`` with ``{"data": [...]}``: stored before the reply
  (without ``sync`` a 200 only means queued). Phoenix upserts on (name, span, identifier), so
  a record sent again replaces itself. A record whose span Phoenix does not have makes the
  whole request a 404 naming the spans.

Errors: :class:`PhoenixUnavailable` for what may pass (a refused or dropped connection, a
timeout, 408, 429, a 5xx, a body that is not the JSON expected); :class:`PhoenixRefused` for a
4xx that will not (its status and Phoenix's ``detail``); a 401/403 is a RunAborted (exit 4).
The key (``PHOENIX_API_KEY``, Phoenix's own variable) is sent only in the ``Authorization``
header and masked in every message.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import aiohttp
import orjson

from ragbatch.core import ConfigError, RunAborted
from ragbatch.providers import Redactor, check_base_url

API_KEY_ENV = "PHOENIX_API_KEY"
PAGE = 1000  # spans a page (Phoenix's maximum)
MAX_BODY = 64 * 1024 * 1024  # a page of 1000 large spans fits; a hostile endless one does not
RETRY_STATUSES = frozenset({408, 429}) | frozenset(range(500, 600))


class PhoenixUnavailable(Exception):
    """Phoenix could not answer now (down, slow, 5xx): try again later."""


class PhoenixRefused(Exception):
    """Phoenix refused the request (a 4xx other than 401/403/408/429)."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(f"HTTP {status}: {detail}")
        self.status = status
        self.detail = detail


def span_number(span_id: str) -> int:
    """Phoenix's row number of a span from its id (``base64("Span:<n>")``)."""
    try:
        kind, _, number = base64.b64decode(span_id, validate=True).decode().partition(":")
        if kind == "Span" and number.isdigit():
            return int(number)
    except (binascii.Error, UnicodeDecodeError, ValueError):
        pass
    raise PhoenixUnavailable(f"a span id that is not Phoenix's (Span:<n> in base64): {span_id!r}")


def check_phoenix_url(url: str, *, allow_insecure_http: bool) -> str:
    """The server's base URL, checked (ConfigError, exit 2), without a trailing slash."""
    base = url.rstrip("/")
    if base.endswith("/v1"):
        raise ConfigError(f"--phoenix {url}: give the server's base URL, without /v1")
    check_base_url(base, "--phoenix", allow_insecure_http=allow_insecure_http)
    return base


async def _body(reply: aiohttp.ClientResponse) -> bytes:
    """The reply's body, read until its end or one byte past :data:`MAX_BODY`."""
    parts, size = [], 0
    async for chunk in reply.content.iter_chunked(1 << 16):
        parts.append(chunk)
        size += len(chunk)
        if size > MAX_BODY:
            break
    return b"".join(parts)


class PhoenixClient:
    """One Phoenix project's spans and span annotations."""

    def __init__(
        self, url: str, project: str, api_key: str | None, *, timeout_s: float = 30.0
    ) -> None:
        if not project or any(c in project for c in "/?#"):
            raise ConfigError(f"--project {project!r}: a Phoenix project name, without / ? #")
        self.url, self.project = url, project
        self.redact = Redactor(api_key)
        self.headers = {"Content-Type": "application/json"}
        if api_key:
            self.headers["Authorization"] = f"Bearer {api_key.strip()}"
        self.timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._session: aiohttp.ClientSession | None = None

    @property
    def spans_path(self) -> str:
        return f"/v1/projects/{self.project}/spans"

    async def _request(
        self, method: str, path: str, params: Mapping[str, str], body: bytes | None = None
    ) -> Any:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=self.timeout, trust_env=False)
        where = f"Phoenix at {self.url}"
        try:
            async with self._session.request(
                method, self.url + path, params=params, data=body, headers=self.headers,
                allow_redirects=False,
            ) as reply:  # fmt: skip
                data = await _body(reply)
                status = reply.status
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise PhoenixUnavailable(self.redact(f"{where}: {type(exc).__name__}: {exc}")) from None
        if len(data) > MAX_BODY:
            raise PhoenixUnavailable(f"{where}: a reply over {MAX_BODY} bytes")
        if status in (401, 403):
            raise RunAborted(
                f"{where} refused the key (HTTP {status}): set {API_KEY_ENV} to a key it accepts"
            )
        if status in RETRY_STATUSES:
            raise PhoenixUnavailable(f"{where}: HTTP {status}")
        try:
            parsed = orjson.loads(data) if data else None
        except orjson.JSONDecodeError:
            if status < 300:
                raise PhoenixUnavailable(
                    f"{where}: HTTP {status}, a body that is not JSON"
                ) from None
            parsed = None
        if status >= 300:
            detail = parsed.get("detail") if isinstance(parsed, dict) else None
            text = str(detail or data[:200].decode(errors="replace")).strip()
            raise PhoenixRefused(status, self.redact(text))
        return parsed

    async def page(
        self,
        cursor: str | None,
        *,
        since: datetime | None = None,
        limit: int = PAGE,
        newest_first: bool = False,
    ) -> tuple[list[dict[str, Any]], str | None]:
        """One page of spans from ``cursor`` (inclusive) in id order (from ``since`` on), and
        the next cursor;
        ([], None) while the project does not exist yet (no span was ever sent to it)."""
        params = {"sort": "id", "order": "desc" if newest_first else "asc", "limit": str(limit)}
        if cursor is not None:
            params["cursor"] = cursor
        if since is not None:
            params["start_time"] = since.isoformat()
        try:
            body = await self._request("GET", self.spans_path, params)
        except PhoenixRefused as exc:
            if exc.status == 404:
                return [], None
            raise
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, list) or not all(isinstance(s, dict) for s in data):
            raise PhoenixUnavailable(f"Phoenix at {self.url}: a spans page without data[]")
        numbers = [span_number(str(s.get("id"))) for s in data]
        ordered = sorted(numbers, reverse=newest_first)
        if numbers != ordered:
            raise ConfigError(
                f"Phoenix at {self.url} does not sort spans by id (GET {self.spans_path}"
                "?sort=id&order=asc): ragbatch watch needs a Phoenix that does (arize-phoenix 20)"
            )
        following = body.get("next_cursor")
        return data, following if isinstance(following, str) and following else None

    async def annotate(self, records: Sequence[Mapping[str, Any]]) -> None:
        """Store span annotations (``sync=true``: stored when this returns)."""
        body = orjson.dumps({"data": [dict(r) for r in records]})
        await self._request("POST", "/v1/span_annotations", {"sync": "true"}, body)

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
