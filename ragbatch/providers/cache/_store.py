"""The reply cache's directory on disk: a diskcache (SQLite) store, read-write or read-only
(file I/O).

Read-write (a live run): diskcache itself, which several processes may share; per-key leases
(:mod:`ragbatch.providers.cache._lease`) keep them from paying twice for one request.

Read-only (``--offline``, ``estimate``, ``cache verify``, the sources of ``cache merge``): a
plain SQLite connection over diskcache's schema that never writes. diskcache rewrites its
settings when it opens a directory and SQLite in WAL mode leaves ``-wal``/``-shm`` files
behind, so reading through diskcache would change a committed cache. The reader opens
``cache.db`` as ``immutable`` (no lock, no side files) unless a ``-wal`` file is already there
(a writer is running, or one was killed): then ``mode=ro``, which reads what the WAL holds and
never writes ``cache.db`` or the WAL. A missing directory reads as an empty cache.

Damage: SQLite reports a damaged file as :class:`sqlite3.DatabaseError` from any call. An
entry that cannot be read is dropped (:class:`UnreadableEntry`: the caller fetches it again);
when it cannot even be dropped, or the store cannot be opened or written, a
:class:`~ragbatch.core._errors.CacheError` says ``cache directory is damaged: …`` (exit 2).
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, TypeVar

import diskcache

from ragbatch.core import CacheError
from ragbatch.providers.cache._batch import MODE_BINARY, MODE_RAW, store_then
from ragbatch.providers.cache._lease import LeaseOp, Leases, rows_with_keys
from ragbatch.providers.cache._swap import finish_interrupted_swap
from ragbatch.providers.cache._writer import LockTaken, forget, is_lock_error, may_wait

T = TypeVar("T")

# Far above any real cache: diskcache must never evict an entry to fit. With culling off
# (``cull_limit=0``) a write also skips diskcache's two queries for what to evict (no entry
# expires and none is ever evicted), and with no eviction policy a new cache has no index of
# store times to update on every write (13 % fewer bytes to the WAL a live row).
SIZE_LIMIT = 2**40
DB_NAME = "cache.db"
REPAIR_HINT = "move it aside or run `ragbatch cache verify --repair`"
_ANY_ENTRY = "SELECT 1 FROM Cache LIMIT 1"  # a row when the cache holds an entry (cache._lease)


# What SQLite raises on a damaged file: its errors, and UnicodeDecodeError when damage made
# a TEXT column or its own error message invalid UTF-8.
SQLITE_FAILURES = (sqlite3.Error, UnicodeDecodeError)
# SQLite's messages for a cache that is fine but cannot be used right now.
_NOT_DAMAGE = ("locked", "busy", "unable to open", "readonly", "disk I/O", "permission", "full")

# One item of a group commit (:meth:`ReplyCache.commit_ops`): take a key's lease, let it go, or
# store a key's entry (the value) and then let its lease go. A store's value is the entry's
# bytes, or a function that makes them, called by the commit: the replies of a batch are then
# encoded back to back, warm, rather than each between two rows' calls.
CacheOp = tuple[
    Literal["acquire", "poll", "release", "store"], str, bytes | Callable[[], bytes] | None
]


@dataclass(frozen=True, slots=True)
class Committed:
    """What one group commit did: the ``acquire`` keys held now, why its stores failed, and
    which of the acquired keys had an entry when they were taken (``stored``: a key not in it
    had none, so its holder need not read the cache again before it sends)."""

    acquired: set[str]
    store_error: CacheError | None = None
    stored: set[str] = field(default_factory=set)


class UnreadableEntry(CacheError):
    """SQLite could not read one entry; it was dropped, so the request is fetched again."""


def is_damage(exc: BaseException) -> bool:
    """Whether a SQLite error means a damaged file (not a lock or a missing permission)."""
    if isinstance(exc, UnicodeDecodeError):
        return True  # even SQLite's message was damaged
    if isinstance(exc, sqlite3.OperationalError):  # a damaged schema, table or column, or
        return not any(sign in str(exc) for sign in _NOT_DAMAGE)  # one of these conditions
    return isinstance(exc, sqlite3.DatabaseError)


def damaged(directory: Path, exc: BaseException | str) -> CacheError:
    """The error a run stops with when the cache directory is damaged (exit 2)."""
    return CacheError(f"cache directory is damaged: {directory}: {exc} ({REPAIR_HINT})")


def store_error(directory: Path, exc: BaseException) -> CacheError:
    if is_damage(exc):
        return damaged(directory, exc)
    return CacheError(f"cannot use cache directory {directory}: {exc}")


def open_store(directory: Path) -> diskcache.Cache:
    """The diskcache store of a cache directory (created if missing); CacheError if it cannot
    be opened. A repair that a killed process left half done is finished first."""
    finish_interrupted_swap(directory)
    try:
        return diskcache.Cache(
            str(directory), size_limit=SIZE_LIMIT, cull_limit=0, eviction_policy="none"
        )
    except SQLITE_FAILURES as exc:
        raise store_error(directory, exc) from None
    except (OSError, diskcache.Timeout) as exc:
        raise CacheError(f"cannot open cache directory {directory}: {exc}") from None
    except Exception as exc:  # diskcache trips over settings that damage changed
        raise damaged(directory, f"its settings cannot be read ({exc})") from None


def _text(data: bytes) -> str | bytes:
    """A TEXT column as str, or its bytes when damage made it invalid UTF-8 (a key that is
    not a str is then a corrupt entry, not a failed query)."""
    try:
        return data.decode()
    except UnicodeDecodeError:
        return data


def connect_read_only(directory: Path) -> sqlite3.Connection | None:
    """A connection that never writes to the directory, or None when there is no cache.db.

    A repair that a killed process left half done is finished first (it renames folders
    beside the directory; no byte of the cache itself changes)."""
    if directory.exists() and not directory.is_dir():  # as for a live run: not "no cache"
        raise CacheError(f"cannot use cache directory {directory}: it is not a directory")
    finish_interrupted_swap(directory)
    path = directory / DB_NAME
    if not path.is_file():
        return None
    wal = path.with_name(DB_NAME + "-wal")
    flag = "mode=ro" if wal.exists() else "immutable=1"
    uri = f"{path.resolve().as_uri()}?{flag}"
    try:
        con = sqlite3.connect(uri, uri=True, check_same_thread=False, timeout=60)
        con.text_factory = _text
        con.execute("SELECT count(*) FROM Settings").fetchone()
    except SQLITE_FAILURES as exc:
        raise store_error(directory, exc) from None
    return con


def read_value(directory: Path, mode: object, filename: object, value: object) -> bytes | None:
    """The bytes of one stored value (in the row, or in diskcache's file for it); None for a
    value stored in another form (not one of ours) or a file that is gone."""
    if mode == MODE_RAW and isinstance(value, bytes):
        return value
    if mode == MODE_BINARY and isinstance(filename, str):
        try:
            return (directory / filename).read_bytes()
        except OSError:
            return None
    return None


class ReplyCache:
    """A directory of cached replies keyed by content address (bytes values, str keys).

    ``read_only=True`` never changes a byte of the directory: :meth:`put` is refused and
    :meth:`delete` does nothing. Every SQLite failure comes out as a CacheError.
    """

    def __init__(
        self, directory: str | Path, *, read_only: bool = False, lease_s: float = 330.0
    ) -> None:
        self.directory = Path(directory)
        self.read_only = read_only
        self.lease_s = lease_s
        self._leases: Leases | None = None
        self._lock = threading.Lock()
        self._store: diskcache.Cache | None = None
        self._con: sqlite3.Connection | None = None
        if read_only:
            self._con = connect_read_only(self.directory)
        else:
            self._store = open_store(self.directory)

    @property
    def db_path(self) -> Path:
        return self.directory / DB_NAME

    def get(self, key: str) -> bytes | None:
        """The stored bytes, or None. UnreadableEntry when SQLite could not read the entry and
        it was dropped; CacheError (damaged) when it could not be dropped either."""
        try:
            if self._store is not None:
                try:
                    value = self._store.get(key)
                except sqlite3.OperationalError as exc:
                    # a lock no reader should meet in WAL mode: wait for it if no_wait was
                    # keeping this connection from waiting, else fail as below
                    if not (
                        is_lock_error(exc) and may_wait(self._store._con, self._store._timeout)
                    ):
                        raise
                    value = self._store.get(key)
                return value if isinstance(value, bytes) else None
            return self._get_read_only(key)
        except (*SQLITE_FAILURES, diskcache.Timeout) as exc:
            if self._store is None or not is_damage(exc):
                raise store_error(self.directory, exc) from None
            self.delete(key)  # raises "damaged" when even that fails
            raise UnreadableEntry(
                f"unreadable cache entry {key[:12]}… dropped ({exc}); it is fetched again"
            ) from None

    def _get_read_only(self, key: str) -> bytes | None:
        if self._con is None:
            return None
        with self._lock:
            row = self._con.execute(
                "SELECT mode, filename, value FROM Cache WHERE key = ? AND raw = 1"
                " AND (expire_time IS NULL OR expire_time > ?)",
                (key, time.time()),
            ).fetchone()
        return None if row is None else read_value(self.directory, *row)

    def acquire_lease(self, key: str) -> bool:
        """Take the cross-process lease of ``key`` (see :mod:`ragbatch.providers.cache._lease`):
        True when this cache object holds it now, False while another live process does."""
        return key in self.acquire_leases([key])

    def acquire_leases(self, keys: Sequence[str]) -> set[str]:
        """Take the leases of ``keys`` in one transaction: the keys held now."""
        return self.exchange_leases([("acquire", key) for key in keys])

    def release_lease(self, key: str) -> None:
        """Let the lease of ``key`` go, once its reply is stored (or its call failed)."""
        if self._leases is not None:
            self.exchange_leases([("release", key)])

    def exchange_leases(self, ops: Sequence[tuple[LeaseOp, str]], *, wait: bool = True) -> set[str]:
        """Let go of the ``release`` keys, then take the ``acquire`` ones, in one transaction
        (a batch of both: see ``cache._writer.GroupCommit``): the acquired keys held now."""
        if self._store is None:
            raise CacheError(f"cache directory {self.directory} is open read-only")
        releases = [key for op, key in ops if op == "release"]
        acquires = [key for op, key in ops if op == "acquire"]
        try:
            return self.leases().exchange(releases, acquires, wait=wait)
        except SQLITE_FAILURES as exc:
            raise store_error(self.directory, exc) from None

    def leases(self, *, alone: bool = False) -> Leases:
        """This object's leases, made on first use (``alone``: see ``cache._lease``)."""
        try:
            with self._lock:  # called from several threads at once: one Leases object
                if self._leases is None:
                    self._leases = Leases(
                        self.db_path, self.lease_s, alone=alone, any_entry=_ANY_ENTRY
                    )
                return self._leases
        except SQLITE_FAILURES as exc:
            raise store_error(self.directory, exc) from None

    def commit_ops(self, ops: Sequence[CacheOp], *, wait: bool = True) -> Committed:
        """One group commit of a run's cache traffic, in one transaction: the ``store``
        entries, then letting go of their leases and of the ``release`` keys and taking the
        ``acquire`` (and ``poll``) ones. A failed store does not fail the lease exchange (that
        transaction is rolled back and the exchange is made alone, without the leases of the
        entries not stored: their rows let them go themselves); it comes back as
        ``store_error``. ``wait=False`` (on the event loop): :class:`LockTaken` instead of
        waiting for a lock; redoing the batch with ``wait=True`` is then safe (nothing of it
        was committed).

        Every commit runs on the store's connection of the calling thread, the one its
        lookups read on: SQLite drops a connection's page cache whenever another connection
        wrote since its last transaction, so one connection for reads, stores and leases
        keeps the pages warm. A batch of ``poll`` ops only (rows waiting for another
        process's lease) reads first and takes the write lock only when a lease is free."""
        if self._store is None:
            raise CacheError(f"cache directory {self.directory} is open read-only")
        entries = [
            (key, value if isinstance(value, bytes) else value())
            for op, key, value in ops
            if op == "store" and value is not None
        ]
        releases = [key for op, key, _ in ops if op in ("store", "release")]
        acquires = [key for op, key, _ in ops if op in ("acquire", "poll")]
        leases = self.leases()
        if not releases and all(op == "poll" for op, _, _ in ops):
            con = self._store._con
            try:
                if wait:
                    may_wait(con, self._store._timeout)
                if not leases.may_take(acquires, con):
                    return Committed(set())
            except SQLITE_FAILURES as exc:
                if not wait and is_lock_error(exc):
                    raise LockTaken(str(exc)) from None
                raise store_error(self.directory, exc) from None

        def exchange_then_look(con: sqlite3.Connection) -> Committed:
            acquired = leases.exchange_in(con, releases, acquires)
            return Committed(acquired, stored=self._stored(acquired, con))

        try:
            return self.put_then(entries, exchange_then_look, wait=wait)
        except CacheError as exc:
            if not entries:
                raise
            failed = exc
        exchange: list[tuple[LeaseOp, str]] = [
            ("release" if op == "release" else "acquire", key)
            for op, key, _ in ops
            if op != "store"
        ]
        acquired = self.exchange_leases(exchange, wait=wait) if exchange else set[str]()
        return Committed(acquired, failed, self._stored(acquired))

    def _stored(self, keys: Collection[str], con: sqlite3.Connection | None = None) -> set[str]:
        """Which of ``keys`` (just acquired) have an entry: one indexed query on ``con`` (the
        acquiring transaction's) or on this thread's connection, after the acquire committed.
        Either way it sees every entry stored before the lease was taken (its holder stores
        before it lets go). When SQLite cannot tell, every key counts as stored: the holder
        then reads the entry as before, which handles the failure."""
        if not keys or self._store is None:
            return set()
        con = self._store._con if con is None else con
        try:
            rows = rows_with_keys(con, "SELECT key FROM Cache", list(keys), " AND raw = 1")
        except SQLITE_FAILURES:
            return set(keys)
        return {row[0] for row in rows}

    def put(self, key: str, value: bytes) -> None:
        if self._store is None:
            raise CacheError(f"cache directory {self.directory} is open read-only")
        self._written_elsewhere()
        try:
            may_wait(self._store._con, self._store._timeout)
            self._store.set(key, value)
        except (*SQLITE_FAILURES, diskcache.Timeout) as exc:
            raise store_error(self.directory, exc) from None

    def put_many(self, entries: Sequence[tuple[str, bytes]], *, wait: bool = True) -> None:
        """Store several entries in one transaction (one commit: see ``cache._writer``)."""
        self._written_elsewhere()
        self.put_then(entries, lambda con: None, wait=wait)

    def _written_elsewhere(self) -> None:
        """A write that takes no lease: the leases can no longer vouch for a miss."""
        if self._leases is not None:
            self._leases.written_elsewhere()

    def put_then(
        self,
        entries: Sequence[tuple[str, bytes]],
        then: Callable[[sqlite3.Connection], T],
        *,
        wait: bool = True,
    ) -> T:
        """:meth:`put_many`, and ``then`` in the same transaction (:func:`store_then`)."""
        if self._store is None:
            raise CacheError(f"cache directory {self.directory} is open read-only")
        try:
            return store_then(self._store, list(entries), then, wait=wait)
        except (*SQLITE_FAILURES, diskcache.Timeout) as exc:
            raise store_error(self.directory, exc) from None

    def delete(self, key: str) -> None:
        if self._store is None:
            return  # read-only: a bad entry is ignored, never removed
        try:
            may_wait(self._store._con, self._store._timeout)
            self._store.delete(key)
        except (*SQLITE_FAILURES, diskcache.Timeout) as exc:
            raise store_error(self.directory, exc) from None

    def keys(self) -> list[str]:
        try:
            if self._store is not None:
                return [k for k in self._store.iterkeys() if isinstance(k, str)]
            if self._con is None:
                return []
            with self._lock:
                rows = self._con.execute("SELECT key FROM Cache WHERE raw = 1").fetchall()
            return [k for (k,) in rows if isinstance(k, str)]
        except (*SQLITE_FAILURES, diskcache.Timeout) as exc:
            raise store_error(self.directory, exc) from None

    def entries(self) -> Iterator[tuple[object, bytes | None]]:
        """Every stored (key, value) in storage order, read-only stores only (read in chunks);
        a key that is not a str (or a value not stored as bytes) comes as it is (or None), for
        the caller to skip."""
        after = 0
        while self._con is not None:
            try:
                with self._lock:
                    rows = self._con.execute(
                        "SELECT rowid, key, raw, mode, filename, value FROM Cache"
                        " WHERE rowid > ? ORDER BY rowid LIMIT 1000",
                        (after,),
                    ).fetchall()
            except SQLITE_FAILURES as exc:
                raise store_error(self.directory, exc) from None
            if not rows:
                return
            for after, key, raw, mode, filename, value in rows:  # noqa: B007 (resumes after it)
                yield (key if raw else None), read_value(self.directory, mode, filename, value)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.get(key) is not None

    def __len__(self) -> int:
        try:
            if self._store is not None:
                return len(self._store)
            if self._con is None:
                return 0
            with self._lock:
                (count,) = self._con.execute("SELECT count(*) FROM Cache").fetchone()
            return int(count)
        except (*SQLITE_FAILURES, diskcache.Timeout) as exc:
            raise store_error(self.directory, exc) from None

    def close(self) -> None:
        """Let this object's leases go and close every connection (all of them, even when
        one fails: the first failure is raised afterwards)."""
        leases, self._leases = self._leases, None
        if self._store is not None:
            # This thread's connection, if it has one (``_con`` would open one): the inline
            # commits that left it in the no-wait state run on the event loop, which closes.
            forget(getattr(self._store._local, "con", None))
        failure: Exception | None = None
        for close in (
            leases.close if leases is not None else None,
            self._store.close if self._store is not None else None,
            self._con.close if self._con is not None else None,
        ):
            try:
                if close is not None:
                    close()
            except SQLITE_FAILURES as exc:
                failure = failure or exc
        if failure is not None:
            raise store_error(self.directory, failure) from None
