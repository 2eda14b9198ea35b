"""Content-addressed reply cache on disk (diskcache; does file I/O).

Key: sha256 of the canonical JSON of what determines an answer (endpoint path, requested
model, state, questions) - never the key, headers or row ids. Value: JSON bytes (never
pickle) of the validated reply with its usage, answering model and recorded latency, wrapped
with a checksum. Only validated successful replies are stored. An entry that does not parse,
fails its checksum or no longer matches the request is reported, dropped and fetched again.

diskcache keeps its index in SQLite, so several processes may share one directory.
:class:`CachedProvider` also sends identical requests that are in flight at the same time
only once.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import anyio
import diskcache
import orjson
from pydantic import ValidationError

from ragbatch.core.errors import CacheError, ProviderError
from ragbatch.core.provider import Call, Provider, Reply
from ragbatch.core.wire import parse_reply, request_key
from ragbatch.providers.cache_writer import GroupWriter

FORMAT = 1
CacheMode = Literal["use", "offline", "refresh", "off"]


def encode_entry(reply: Reply, key: str | None = None) -> bytes:
    """Header line (format, body checksum, the key it belongs under), then the reply JSON."""
    payload = reply.model_dump(mode="json", by_alias=True, exclude_none=True)
    body = orjson.dumps(payload, option=orjson.OPT_SORT_KEYS)
    head: dict[str, object] = {"format": FORMAT, "sha256": hashlib.sha256(body).hexdigest()}
    if key is not None:
        head["key"] = key
    return orjson.dumps(head) + b"\n" + body


def entry_body(data: bytes, key: str | None = None) -> bytes:
    """The reply JSON of one entry once its header checks out; ValueError when it cannot be
    trusted (no header, unknown format, checksum mismatch).

    With ``key``, the entry must name that key: a valid entry copied under another
    request's key (same question ids, other state) is not trusted.
    """
    head, sep, body = data.partition(b"\n")
    if not sep:
        raise ValueError("no header")
    meta: Any = orjson.loads(head)
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise ValueError("unknown entry format")
    if hashlib.sha256(body).hexdigest() != meta.get("sha256"):
        raise ValueError("checksum mismatch")
    if key is not None and meta.get("key") != key:
        raise ValueError("entry belongs to another request")
    return body


def decode_entry(data: bytes, call: Call, key: str | None = None) -> Reply:
    """Parse and verify one entry (:func:`entry_body`, then the answers against the request);
    ValueError when it cannot be trusted."""
    reply = Reply.model_validate_json(entry_body(data, key))
    # Re-check the stored answers against the request, as for a fresh reply.
    wire = orjson.dumps(
        {
            "model": reply.model,
            "answers": {k: v.model_dump(mode="json") for k, v in reply.answers.items()},
            "usage": {
                "input_tokens": reply.usage.input_tokens,
                "output_tokens": reply.usage.output_tokens,
            },
        }
    )
    parse_reply(call.request, wire)
    return reply


# Far above any real cache: diskcache must never evict an entry to fit.
SIZE_LIMIT = 2**40


def open_store(directory: Path) -> diskcache.Cache:
    """The diskcache store of a cache directory (created if missing); CacheError if it cannot
    be opened."""
    try:
        return diskcache.Cache(str(directory), size_limit=SIZE_LIMIT)
    except Exception as exc:  # diskcache raises sqlite3/OSError variants
        raise CacheError(f"cannot open cache directory {directory}: {exc}") from None


@dataclass
class CacheStats:
    hits: int = 0
    misses: int = 0
    writes: int = 0
    corrupt: int = 0
    deduplicated: int = 0
    saved_input_tokens: int = 0
    saved_models: dict[str, int] = field(default_factory=dict)


class ReplyCache:
    """A directory of cached replies keyed by content address."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self._store = open_store(self.directory)

    def get(self, key: str) -> bytes | None:
        value = self._store.get(key)
        return value if isinstance(value, bytes) else None

    def put(self, key: str, value: bytes) -> None:
        self._store.set(key, value)

    def put_many(self, entries: Sequence[tuple[str, bytes]]) -> None:
        """Store several entries in one transaction (one commit)."""
        with self._store.transact():
            for key, value in entries:
                self.put(key, value)

    def delete(self, key: str) -> None:
        self._store.delete(key)

    def keys(self) -> list[str]:
        return [k for k in self._store.iterkeys() if isinstance(k, str)]

    def __len__(self) -> int:
        return len(self._store)

    def close(self) -> None:
        self._store.close()


class CachedProvider:
    """Wraps a provider: answers from the cache when it can, stores what it fetched."""

    def __init__(self, inner: Provider, cache: ReplyCache | None, mode: CacheMode = "use") -> None:
        self.inner = inner
        self.cache = cache
        self.mode = mode
        self.name = inner.name
        self.model = inner.model
        self.endpoint = inner.endpoint
        self.stats = CacheStats()
        self.warnings: list[str] = []
        self._in_flight: dict[str, anyio.Event] = {}
        # Keys fetched afresh in this run: ``refresh`` trusts those, so a duplicate
        # request (in flight at the same time or later) is not sent again.
        self._refreshed: set[str] = set()
        # Writes are group-committed (see cache_writer); each waits for its own commit.
        self._writer = GroupWriter(cache.put_many) if cache is not None else None

    def key_for(self, call: Call) -> str:
        return request_key(self.endpoint, call.request)

    def _lookup(self, key: str, call: Call) -> Reply | None:
        if self.cache is None:
            return None
        # A read is a fast indexed SQLite lookup: done inline (a thread hop per row would
        # halve warm-replay throughput). Writes, which may wait on the WAL, go to a thread.
        data = self.cache.get(key)
        if data is None:
            return None
        try:
            return decode_entry(data, call, key)
        except (ValueError, ValidationError, ProviderError) as exc:
            self.stats.corrupt += 1
            self.warnings.append(f"corrupt cache entry {key[:12]}… dropped ({exc})")
            self.cache.delete(key)
            return None

    async def fetch_answers(self, call: Call) -> Reply:
        if self.cache is None or self.mode == "off":
            return await self.inner.fetch_answers(call)
        key = self.key_for(call)
        while (pending := self._in_flight.get(key)) is not None:
            self.stats.deduplicated += 1
            await pending.wait()
        trusted = self.mode != "refresh" or key in self._refreshed
        if trusted and (hit := self._lookup(key, call)) is not None:
            self.stats.hits += 1
            self.stats.saved_input_tokens += hit.usage.input_tokens
            models = self.stats.saved_models
            models[hit.model] = models.get(hit.model, 0) + hit.usage.input_tokens
            return hit.model_copy(update={"cached": True})
        if self.mode == "offline":
            raise ProviderError(
                f"no cached reply for this request (cache key {key[:16]}…) and --offline is set",
                kind="cache-miss",
            )
        self.stats.misses += 1
        done = self._in_flight[key] = anyio.Event()
        try:
            reply = await self.inner.fetch_answers(call)
            assert self._writer is not None
            await self._writer.put(key, encode_entry(reply, key))
            self.stats.writes += 1
            self._refreshed.add(key)
            return reply
        finally:
            del self._in_flight[key]
            done.set()

    async def aclose(self) -> None:
        await self.inner.aclose()
        if self.cache is not None:
            self.cache.close()
