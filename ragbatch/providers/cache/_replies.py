"""Content-addressed reply cache on disk (diskcache; does file I/O).

Key: sha256 of the canonical JSON of what determines an answer (endpoint path, requested
model, state, questions) - never the key, headers or row ids. Value: JSON bytes (never
pickle) of the validated reply with its usage, answering model and recorded latency, wrapped
with a checksum. Only validated successful replies are stored. An entry that does not parse,
fails its checksum or no longer matches the request is reported, dropped and fetched again.

diskcache keeps its index in SQLite, so several processes may share one directory.
:class:`CachedProvider` sends identical requests that are in flight at the same time only
once, within a process and across processes sharing the directory: before sending, it takes
the key's lease (:mod:`ragbatch.providers.cache._lease`; in memory while it is alone in the
directory); a process that finds the lease held waits, then answers from the entry the holder
stored (or, when the holder failed or died, takes the lease over and sends the request
itself).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import itertools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

import anyio
import orjson

from ragbatch.core import (
    TOO_LARGE_KIND,
    CacheError,
    Call,
    Provider,
    ProviderError,
    Reply,
    RequestLimits,
    oversize_reason,
    parse_reply,
    read_reply,
    request_key,
)
from ragbatch.providers.cache._lease import Leases
from ragbatch.providers.cache._store import (
    CacheOp,
    Committed,
    ReplyCache,
    UnreadableEntry,
    open_store,
)
from ragbatch.providers.cache._writer import Batch, GroupCommit, unsettled

__all__ = [
    "FORMAT",
    "CacheMode",
    "CachePath",
    "CacheStats",
    "CachedProvider",
    "ReplyCache",
    "decode_entry",
    "encode_entry",
    "entry_body",
    "open_store",
    "read_raw",
    "recorded_models",
]

FORMAT = 1
# Waiting for another process's lease: the first poll, and the longest gap between polls.
POLL_FIRST_S, POLL_MAX_S = 0.01, 0.1
CacheMode = Literal["use", "offline", "refresh", "off"]
V = TypeVar("V")


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


def _wire_bytes(reply: Reply) -> bytes:
    """A stored reply as the service sent it (what :func:`parse_reply` checks)."""
    return orjson.dumps(
        {
            "model": reply.model,
            "answers": {k: v.model_dump(mode="json") for k, v in reply.answers.items()},
            "usage": {
                "input_tokens": reply.usage.input_tokens,
                "output_tokens": reply.usage.output_tokens,
            },
        }
    )


def decode_entry(data: bytes, call: Call, key: str | None = None) -> Reply:
    """Parse and verify one entry (:func:`entry_body`, then the answers against the request);
    ValueError when it cannot be trusted."""
    body = entry_body(data, key)
    reply = Reply.model_validate_json(body)
    # Re-check the stored answers against the request, as for a fresh reply. The answers
    # just validated are passed on as stored (each one's JSON as ``Answer`` dumps it, keys a
    # wire answer ignores aside): no dump of every answer model on each replayed row.
    usage = reply.usage
    wire = {
        "model": reply.model,
        "answers": orjson.loads(body)["answers"],
        "usage": {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens},
    }
    parse_reply(call.request, orjson.dumps(wire))
    return reply


def validate_entry(data: bytes, key: str | None = None) -> None:
    """ValueError unless an entry can be trusted as far as is known without its request:
    header and checksum (:func:`entry_body`), and every number in range as in a fresh reply
    (``cache verify``'s check of each entry)."""
    reply = Reply.model_validate_json(entry_body(data, key))
    try:
        read_reply(_wire_bytes(reply))
    except ProviderError as exc:
        raise ValueError(str(exc)) from None


@dataclass
class CacheStats:
    hits: int = 0
    misses: int = 0
    writes: int = 0
    corrupt: int = 0
    deduplicated: int = 0
    saved_input_tokens: int = 0
    saved_models: dict[str, int] = field(default_factory=dict)


def recorded_models(cache: ReplyCache, limit: int = 1000) -> list[str]:
    """The models that answered the first ``limit`` trusted entries of a read-only cache,
    sorted (a sample: the key holds the requested model only as a hash, the entry the
    answering one)."""
    models: set[str] = set()
    for key, data in itertools.islice(cache.entries(), limit):
        if not isinstance(key, str) or data is None:
            continue
        try:
            model = orjson.loads(entry_body(data, key)).get("model")
        except (ValueError, AttributeError):
            continue
        if isinstance(model, str):
            models.add(model)
    return sorted(models)


def read_raw(cache: ReplyCache, key: str, stats: CacheStats, warnings: list[str]) -> bytes | None:
    """The stored bytes of ``key``, or None; an entry SQLite could not read (and dropped) is
    counted corrupt, said in ``warnings`` and read as a miss (it is fetched again)."""
    try:
        return cache.get(key)
    except UnreadableEntry as exc:
        stats.corrupt += 1
        warnings.append(str(exc))
        return None


class CachePath(Generic[V]):
    """The one way to the cache for every provider (Jev replies, judge verdicts): a lookup
    that drops what fails to decode, then, on a miss, the key's in-process and cross-process
    lease, the call, and a group-committed write that returns once the entry is on disk.

    ``mode``: ``use`` (answer from the cache, fetch and store on a miss), ``offline`` (a
    miss is a ``cache-miss`` failure; nothing is sent), ``refresh`` (fetch again, except
    what this run already fetched); ``off`` is the caller's: it does not build a path.
    """

    def __init__(self, cache: ReplyCache, mode: CacheMode = "use", label: str = "cache") -> None:
        self.cache, self.mode, self.label = cache, mode, label
        self.stats = CacheStats()
        self.warnings: list[str] = []
        # Keys being fetched, each with the event its duplicates wait on (made by the first
        # of them: most keys have none, and an event a row was ~1 % of a live row's CPU).
        self._in_flight: dict[str, anyio.Event | None] = {}
        # Keys of that kind whose reply is fetched and handed to a commit not yet over (a
        # deferred write, see cache._writer): their duplicates wait for that commit.
        self._storing: dict[str, Batch[CacheOp, Committed]] = {}
        # Keys fetched afresh in this run: ``refresh`` trusts those, so a duplicate
        # request (in flight at the same time or later) is not sent again.
        self._refreshed: set[str] = set()
        # Writes and cross-process leases are group-committed together (see cache._writer):
        # one commit (on the loop when no other process holds the lock, else in a thread)
        # stores the replies of the rows just fetched, then lets go of their leases and takes
        # those of the rows about to be sent, for every row that arrived meanwhile; each row
        # waits for its own commit.
        self._commits: GroupCommit[CacheOp, Committed] | None = None
        # The leases, opened by the first fetch before its lookup so that this owner may
        # lease alone (in memory: cache._lease): an entry stored before it went alone is found
        # by the lookup. Not before: a path never used (a run refused after it was built)
        # leaves no row and no thread behind.
        self._leases: Leases | None = None
        self._leases_opened = cache.read_only
        if not cache.read_only:
            self._commits = GroupCommit(
                cache.commit_ops, lambda ops: cache.commit_ops(ops, wait=False)
            )

    def open_leases(self) -> None:
        """Open this path's leases, alone if nobody else is in the directory (the first fetch
        does, before its lookup; done once)."""
        if not self._leases_opened:
            self._leases_opened = True
            with contextlib.suppress(CacheError):  # the first commit says what is wrong
                self._leases = self.cache.leases(alone=True)

    def lookup(self, key: str, decode: Callable[[bytes], V]) -> V | None:
        """The decoded entry of ``key``, or None (missing, unreadable or failing ``decode``:
        then counted corrupt, said in ``warnings`` and dropped)."""
        # A read is a fast indexed SQLite lookup: done inline (a thread hop per row would
        # halve warm-replay throughput). Writes, which may wait on the WAL, go to a thread.
        data = read_raw(self.cache, key, self.stats, self.warnings)
        if data is None:
            return None
        try:
            return decode(data)
        except (ValueError, LookupError, TypeError, ProviderError) as exc:
            self.stats.corrupt += 1
            done = "ignored (read-only)" if self.cache.read_only else "dropped"
            self.warnings.append(f"corrupt {self.label} entry {key[:12]}… {done} ({exc})")
            self.cache.delete(key)
            return None

    async def fetch(
        self,
        key: str,
        decode: Callable[[bytes], V],
        encode: Callable[[V], bytes],
        send: Callable[[], Awaitable[V]],
        on_hit: Callable[[V], V],
    ) -> V:
        """The entry of ``key`` (passed through ``on_hit``), else ``send()``'s value, stored:
        committed when this returns, or, within ``deferred_writes``, handed to the next commit
        (settled before the task sends again)."""
        if not self._leases_opened:
            self.open_leases()
        waited = False
        while key in self._in_flight:
            if not waited:
                self.stats.deduplicated += 1
                waited = True
            storing = self._storing.get(key)
            if storing is not None:  # fetched: its commit may need us to run it
                assert self._commits is not None
                with contextlib.suppress(Exception):  # the fetching task says what failed
                    await self._commits.wait(storing)
                continue
            pending = self._in_flight[key]
            if pending is None:
                pending = self._in_flight[key] = anyio.Event()
            await pending.wait()
        trusted = self.mode != "refresh" or key in self._refreshed
        # alone in a new cache, a key this owner never held has no entry (cache._lease)
        unstored = self._leases is not None and self._leases.unstored(key)
        if trusted and not unstored and (hit := self.lookup(key, decode)) is not None:
            return on_hit(hit)
        if self.mode == "offline" or self._commits is None:
            self.stats.misses += 1  # a miss all the same: the row fails instead of fetching
            raise ProviderError(
                f"no cached reply for this request (cache key {key[:16]}…) and --offline is set",
                kind="cache-miss",
            )
        self._in_flight[key] = None
        deferred = False
        try:
            if (hit := await self._claim(key, decode)) is not None:
                return on_hit(hit)
            self.stats.misses += 1
            let_go = True  # stored (or failed): a process waiting for this key may go on
            writes = unsettled()
            try:
                if writes is not None:  # this task's last reply is on disk before it pays again
                    await writes.settle()
                value = await send()
                # Stores the entry, then lets the lease go, in one commit.
                store: CacheOp = ("store", key, functools.partial(encode, value))
                if writes is None:  # returns once it is committed
                    _check_store(await self._commits.submit(store))
                else:  # handed to the next commit; duplicates of the key wait for it
                    batch = self._storing[key] = self._commits.defer(store)
                    batch.then.append(lambda: self._stored(key))
                    writes.add(lambda: self._settle(key, batch))
                    deferred = True
                let_go = False
            finally:
                if let_go:
                    with anyio.CancelScope(shield=True):
                        await self._let_go(key)
            self.stats.writes += 1
            self._refreshed.add(key)
            return value
        finally:
            if not deferred:
                self._stored(key)
            elif (waiting := self._in_flight[key]) is not None:  # to wait for the commit now
                self._in_flight[key] = None
                waiting.set()

    async def _settle(self, key: str, batch: Batch[CacheOp, Committed]) -> None:
        """Wait for the deferred store of ``key``; when it failed, let its lease go (as a
        fetch that fails does) and raise."""
        assert self._commits is not None
        try:
            _check_store(await self._commits.wait(batch))
        except Exception:
            with anyio.CancelScope(shield=True):
                await self._let_go(key)
            raise

    def _stored(self, key: str) -> None:
        """``key``'s fetch is over (stored, or failed): its duplicates go on."""
        self._storing.pop(key, None)
        if (waited_on := self._in_flight.pop(key, None)) is not None:
            waited_on.set()

    async def _claim(self, key: str, decode: Callable[[bytes], V]) -> V | None:
        """Take the cross-process lease of ``key``, waiting while another process holds it;
        the entry that process stored, if any, instead of the lease (then nothing is sent)."""
        if self._leases is not None and self._leases.take_alone(key):
            return None  # nobody else stores while this owner is alone: nothing to read
        delay, waited = POLL_FIRST_S, False
        assert self._commits is not None  # a writable cache
        # the first try goes straight to the write; later ones read first (see commit_ops)
        while True:
            done = await self._commits.submit(("poll" if waited else "acquire", key, None))
            if key in done.acquired:
                break
            if not waited:
                self.stats.deduplicated += 1
                waited = True
            await anyio.sleep(delay)
            delay = min(2 * delay, POLL_MAX_S)
        if self.mode == "refresh" and not waited:
            return None  # the entry there predates this run: refresh does not trust it
        # The holder before us stores its entry before it lets the lease go; the acquiring
        # commit looked for it (``stored``): when there was none, there is nothing to read.
        if key not in done.stored:
            return None
        hit = self.lookup(key, decode)
        if hit is not None:
            await self._let_go(key)
        return hit

    async def _let_go(self, key: str) -> None:
        assert self._commits is not None
        if self._leases is None or not self._leases.let_go_alone(key):
            await self._commits.submit(("release", key, None))


def _check_store(committed: Committed) -> None:
    """Raise the store that failed inside a commit whose leases went through."""
    if committed.store_error is not None:
        raise committed.store_error


class CachedProvider:
    """Wraps a provider: answers from the cache when it can, stores what it fetched."""

    def __init__(
        self,
        inner: Provider,
        cache: ReplyCache | None,
        mode: CacheMode = "use",
        sizes: RequestLimits | None = None,
    ) -> None:
        self.inner = inner
        self.cache = cache
        self.mode = mode
        self.sizes = sizes  # a request over these is never sent, so never cached
        self.name = inner.name
        self.model = inner.model
        self.endpoint = inner.endpoint
        self.path: CachePath[Reply] | None = None
        if cache is not None:
            self.path = CachePath(cache, mode)
            self.stats, self.warnings = self.path.stats, self.path.warnings
        else:
            self.stats, self.warnings = CacheStats(), []

    def key_for(self, call: Call) -> str:
        return request_key(self.endpoint, call.request, call.probe)

    def _hit(self, hit: Reply) -> Reply:
        self.stats.hits += 1
        self.stats.saved_input_tokens += hit.usage.input_tokens
        models = self.stats.saved_models
        models[hit.model] = models.get(hit.model, 0) + hit.usage.input_tokens
        return hit.model_copy(update={"cached": True})

    async def fetch_answers(self, call: Call) -> Reply:
        if self.path is None or self.mode == "off":
            return await self.inner.fetch_answers(call)
        if self.mode == "offline" and self.sizes is not None:
            too_large = oversize_reason(call.request, self.sizes)
            if too_large is not None:  # never sent live, so never cached: fail as live does
                self.stats.misses += 1
                raise ProviderError(too_large, kind=TOO_LARGE_KIND)
        key = self.key_for(call)
        return await self.path.fetch(
            key,
            lambda data: decode_entry(data, call, key),
            lambda reply: encode_entry(reply, key),
            lambda: self.inner.fetch_answers(call),
            self._hit,
        )

    async def aclose(self) -> None:
        await self.inner.aclose()
        if self.cache is not None:
            self.cache.close()
