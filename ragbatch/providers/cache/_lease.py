"""Per-key leases in a cache directory: processes sharing one cache never pay twice for one
request in flight (file I/O, SQLite).

A lease is a row of the table ``RagbatchLease`` in the directory's own ``cache.db`` (one
file, one lock, no side files): the request key, the owner (host, pid, a token of the process
and of the :class:`Leases` object) and an expiry. The process that takes a key's lease sends
the request, stores the reply, then lets the lease go; another process that wants the same
key meanwhile waits and then reads the stored reply. A lease stops counting when it expires
or, on the same host, when its process is gone (``kill -9``): the next process takes it over
at once. A pid reused by a later process is told apart by the process token.

Taking a lease is one ``BEGIN IMMEDIATE`` transaction (check, then write), so two processes
can never both hold one key. Leases are only a way to avoid paying twice: a cache without
them (an older ragbatch) is still correct, it just may send a request twice.

**Alone.** A run nearly always has its cache to itself, and then a lease row written and
deleted for each request only costs time (two transactions a request). An owner opened with ``alone=True`` that finds no live row of another owner
writes one row, ``~alone``, in the same transaction, and from then on takes and lets go of
its keys in memory (:meth:`Leases.take_alone`), with no transaction. Another owner that wants
a key while a live ``~alone`` row is there takes nothing: it writes a ``~join:<owner>`` row
and waits. The owner alone looks for such rows every ``WATCH_S`` (a thread), and when it sees
a live one it writes the lease rows of every key it holds and deletes its ``~alone`` row, in
one transaction: from then on it leases as everyone does, and the newcomer finds the keys in
flight leased as usual. So two owners never both hold one key, alone or not. The ``~alone``
row expires as a lease does, renewed by the watch while it is alone; a ``kill -9`` leaves it
to a dead process, which nobody waits for. The owner decides before its first lookup (see
``CachePath``): an entry another process stored earlier is then seen by the lookup, since
nobody stores a key without leasing it.

**Alone in a new cache.** An owner that goes alone in a cache with no entry at all (its
``any_entry`` query finds none in the same transaction: a first run in a new directory) knows
more: while it stays alone, every entry stored there is one of a key it held. A key it never
held has none, and :meth:`Leases.unstored` says so, so the lookup before the send, a read of
cold SQLite pages that could only miss, is skipped. The keys held are kept as bits of a filter of
fixed size (1 MiB, whatever the rows): a key whose bit another key set is looked up, as before.
A write that takes no lease (:meth:`ReplyCache.put`) ends this in its process; one from a
process that does not lease (``ragbatch cache merge`` into a directory a run is using, an older
ragbatch) can be missed, and the key is then fetched and paid again (never a wrong answer).
"""

from __future__ import annotations

import os
import secrets
import socket
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

from ragbatch.providers.cache._writer import LockTaken, forget, may_wait, no_wait

# Told apart from a later process that gets the same pid.
_PROCESS_TOKEN = secrets.token_hex(8)
_HOST = socket.gethostname()
# The owners open in this process: a lease of this process whose owner is not here is stale.
_OPEN_OWNERS: set[str] = set()

LeaseOp = Literal["acquire", "release"]
_CHUNK = 500  # keys per SELECT ... IN (...): under SQLite's variable limit
_TIMEOUT_S = 60.0  # how long a commit in a thread waits for another process's write lock
ALONE = "~alone"  # the row of an owner that leases in memory (a request key is hex: no clash)
JOIN = "~join:"  # + owner: the row of an owner waiting for the one alone to lease in rows
WATCH_S = 0.1  # how often the owner alone looks for a newcomer's ~join row
_FILTER_BITS = 1 << 23  # the keys held alone in a new cache, as bits (1 MiB)
_JOIN_KEYS = f"key > '{JOIN}' AND key < '{JOIN[:-1]};'"  # the ~join: rows (';' follows ':')
_JOINS = f"SELECT owner, host, pid, process, expires FROM RagbatchLease WHERE {_JOIN_KEYS}"
# WITHOUT ROWID: the key is the table's only b-tree (a lease written and deleted a row touches
# one page, not a table page and its primary-key index's). A table made before stays as it is.
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS RagbatchLease ("
    " key TEXT PRIMARY KEY, owner TEXT NOT NULL, host TEXT NOT NULL, pid INTEGER NOT NULL,"
    " process TEXT NOT NULL, expires REAL NOT NULL) WITHOUT ROWID"
)


def rows_with_keys(
    con: sqlite3.Connection, select: str, keys: Sequence[str], also: str = ""
) -> list[tuple[Any, ...]]:
    """``select`` (a ``SELECT … FROM table``) ``WHERE key IN keys`` (``also``: more conditions,
    ``AND …``), in chunks under SQLite's limit on variables."""
    rows: list[tuple[Any, ...]] = []
    for start in range(0, len(keys), _CHUNK):
        chunk = keys[start : start + _CHUNK]
        marks = ",".join("?" * len(chunk))
        rows += con.execute(f"{select} WHERE key IN ({marks}){also}", chunk).fetchall()
    return rows


def is_process_alive(pid: int) -> bool:
    """Whether a process with this pid runs on this host (a zombie, dead but not yet reaped
    by its parent, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # someone else's process
    except OSError:
        return False
    try:  # Linux: the state after the command name; elsewhere the signal check must do
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[:1] != ["Z"]


class Leases:
    """The leases of one cache directory, as seen by one owner (this object).

    Thread-safe: called from worker threads (each call is a short SQLite transaction). SQLite
    errors come out as they are: :class:`~ragbatch.providers.cache._store.ReplyCache` turns them
    into CacheErrors.
    """

    def __init__(
        self,
        db_path: Path,
        ttl_s: float = 330.0,
        *,
        alone: bool = False,
        any_entry: str | None = None,
    ) -> None:
        """``alone``: lease in memory while no other owner is there. ``any_entry``: a query
        that returns a row when the directory holds an entry (see "Alone in a new cache")."""
        self.db_path = db_path
        self.ttl_s = ttl_s
        self.owner = f"{_HOST}:{os.getpid()}:{_PROCESS_TOKEN}:{secrets.token_hex(4)}"
        self._lock = threading.Lock()  # this object's connection
        self._con = sqlite3.connect(
            db_path, timeout=_TIMEOUT_S, isolation_level=None, check_same_thread=False
        )
        # A lease need not survive a power cut: no fsync per lease (WAL stays consistent).
        self._con.execute("PRAGMA synchronous = NORMAL")
        self._con.execute(_SCHEMA)
        _OPEN_OWNERS.add(self.owner)
        # Alone (module docstring): the keys held in memory. Lock order: ``_lock``, then
        # SQLite's write lock, then ``_memory`` (a commit holds the write lock when it calls
        # exchange_in), so the watch can stop it while no commit runs.
        self.alone = False
        self._held: set[str] = set()
        self._memory = threading.Lock()
        self._joined = False  # this owner's ~join row may be there
        self._fresh = False  # went alone in a cache with no entry: see unstored
        self._taken = bytearray()  # then: a bit for every key held alone (under _memory)
        self._closing = threading.Event()
        self._watch: threading.Thread | None = None
        if alone:
            self._go_alone(any_entry)

    def _go_alone(self, any_entry: str | None) -> None:
        """Write the ``~alone`` row if no other live owner has a row, then start the watch."""
        with self._lock:
            self._con.execute("BEGIN IMMEDIATE")
            try:
                rows = self._con.execute(
                    "SELECT owner, host, pid, process, expires FROM RagbatchLease"
                ).fetchall()
                now = time.time()
                if not any(self._is_live(row, now) for row in rows):
                    self._write(self._con, [ALONE])
                    self.alone = True
                    if any_entry is not None and self._con.execute(any_entry).fetchone() is None:
                        self._fresh = True
                        self._taken = bytearray(_FILTER_BITS // 8)
                self._con.execute("COMMIT")
            except sqlite3.Error:  # a full disk, a lock held for a minute: lease in rows
                self.alone = False
                if self._con.in_transaction:
                    self._con.execute("ROLLBACK")
                return
        if self.alone:
            self._watch = threading.Thread(target=self._watching, name="ragbatch-lease-watch")
            self._watch.daemon = True
            self._watch.start()

    def _write(self, con: sqlite3.Connection, keys: Sequence[str]) -> None:
        """This owner's rows for ``keys``, expiring one ``ttl_s`` from now."""
        expires = time.time() + self.ttl_s
        con.executemany(
            "INSERT OR REPLACE INTO RagbatchLease VALUES (?, ?, ?, ?, ?, ?)",
            [(key, self.owner, _HOST, os.getpid(), _PROCESS_TOKEN, expires) for key in keys],
        )

    def take_alone(self, key: str) -> bool:
        """Hold ``key`` in memory, with no transaction, if this owner is alone: whether it was
        (False: take it with :meth:`exchange`)."""
        return self._in_memory(self._hold, key)

    def _hold(self, key: str) -> None:
        """Hold ``key`` alone (under ``_memory``), and set its bit in a new cache."""
        self._held.add(key)
        if self._fresh:
            bit = hash(key) % _FILTER_BITS
            self._taken[bit >> 3] |= 1 << (bit & 7)

    def unstored(self, key: str) -> bool:
        """Whether ``key`` surely has no entry: this owner went alone in a cache with none,
        is still alone, and never held ``key`` (so never stored it, and nobody else did).
        False is "look it up"."""
        if not (self._fresh and self.alone):
            return False
        bit = hash(key) % _FILTER_BITS
        return not self._taken[bit >> 3] & (1 << (bit & 7))

    def written_elsewhere(self) -> None:
        """An entry was stored without a lease: from now on :meth:`unstored` says "look it
        up"."""
        self._fresh = False

    def let_go_alone(self, key: str) -> bool:
        """Let ``key`` go in memory if this owner is alone: whether it was."""
        return self._in_memory(self._held.discard, key)

    def _in_memory(self, change: Callable[[str], None], key: str) -> bool:
        if not self.alone:
            return False
        with self._memory:
            if self.alone:
                change(key)
            return self.alone

    def _watching(self) -> None:
        """While alone: every ``WATCH_S``, stop being alone if a live newcomer waits (or the
        ``~alone`` row is no longer this owner's), and renew the row every third of its life."""
        renewed = time.monotonic()
        while self.alone and not self._closing.wait(WATCH_S):
            try:
                with self._lock:
                    if self._closing.is_set():
                        return
                    may_wait(self._con, _TIMEOUT_S)
                    now = time.time()
                    joins = self._con.execute(_JOINS).fetchall()
                    if any(self._is_live(row, now) for row in joins):
                        self._stop_alone()
                    elif time.monotonic() - renewed > self.ttl_s / 3:
                        renewed = time.monotonic()
                        renewal = self._con.execute(
                            "UPDATE RagbatchLease SET expires = ? WHERE key = ? AND owner = ?",
                            (now + self.ttl_s, ALONE, self.owner),
                        )
                        if renewal.rowcount == 0:  # taken over: lease in rows from now on
                            self._stop_alone()
            except sqlite3.Error:
                continue  # a lock held for a minute, a full disk: try again next time

    def _stop_alone(self) -> None:
        """Write the rows of the keys held in memory and delete ``~alone`` and the ``~join``
        rows, in one transaction; from then on this owner leases in rows (under ``_lock``)."""
        self._con.execute("BEGIN IMMEDIATE")
        try:
            with self._memory:
                self._write(self._con, sorted(self._held))
                self._con.execute(
                    f"DELETE FROM RagbatchLease WHERE (key = ? AND owner = ?) OR ({_JOIN_KEYS})",
                    (ALONE, self.owner),
                )
                self._con.execute("COMMIT")
                self.alone = False
                self._held.clear()
        except BaseException:
            if self._con.in_transaction:
                self._con.execute("ROLLBACK")
            raise

    def _is_live(self, row: tuple[str, str, int, str, float], now: float) -> bool:
        """Whether a lease row still holds its key against this owner."""
        owner, host, pid, process, expires = row
        if owner == self.owner:
            return False  # ours: taking it again renews it
        if expires <= now:
            return False
        if host != _HOST:
            return True  # another machine's process: only the expiry tells
        if pid == os.getpid():  # another cache object of this process, or a dead process
            return process == _PROCESS_TOKEN and owner in _OPEN_OWNERS  # whose pid we got
        return is_process_alive(pid)

    def acquire(self, key: str) -> bool:
        """Take the lease of ``key``: True when this owner holds it now, False while another
        live owner does."""
        return key in self.exchange([], [key])

    def exchange(
        self, releases: Sequence[str], acquires: Sequence[str], *, wait: bool = True
    ) -> set[str]:
        """In one transaction, let ``releases`` go, then take what it can of ``acquires``:
        the keys of ``acquires`` this owner holds now. ``wait=False`` (a commit on the event
        loop): :class:`LockTaken` instead of waiting for a lock, and no WAL checkpoint."""
        if not self._lock.acquire(blocking=wait):
            raise LockTaken("the lease connection is in use")
        try:
            if wait:
                may_wait(self._con, _TIMEOUT_S)
                return self._exchange(releases, acquires)
            with no_wait(self._con):
                return self._exchange(releases, acquires)
        finally:
            self._lock.release()

    def _exchange(self, releases: Sequence[str], acquires: Sequence[str]) -> set[str]:
        """The transaction of :meth:`exchange` (under its lock)."""
        # A plain read first when only taking: waiting takes no write lock (but asking an
        # owner alone to lease in rows does).
        if not releases and not self.may_take(acquires, self._con):
            return set()
        self._con.execute("BEGIN IMMEDIATE")
        try:
            held = self.exchange_in(self._con, releases, acquires)
            self._con.execute("COMMIT")
        except BaseException:
            if self._con.in_transaction:
                self._con.execute("ROLLBACK")
            raise
        return held

    def exchange_in(
        self, con: sqlite3.Connection, releases: Sequence[str], acquires: Sequence[str]
    ) -> set[str]:
        """:meth:`exchange` inside a write transaction the caller holds open on ``con`` (a
        connection to the same ``cache.db``; the reply cache stores its entries in the same
        transaction): commits nothing itself."""
        if self.alone:
            with self._memory:
                if self.alone:  # the caller's transaction keeps the watch from stopping it
                    self._held.difference_update(releases)
                    for key in acquires:
                        self._hold(key)
                    return set(acquires)
        con.executemany(
            "DELETE FROM RagbatchLease WHERE key = ? AND owner = ?",
            [(key, self.owner) for key in releases],
        )
        free, joining = self._free(acquires, con)
        if joining:  # an owner is alone: ask it to lease in rows, take nothing meanwhile
            self._write(con, [JOIN + self.owner])
            self._joined = True
            return set()
        if self._joined and acquires:
            con.execute("DELETE FROM RagbatchLease WHERE key = ?", (JOIN + self.owner,))
            self._joined = False
        self._write(con, free)
        return set(free)

    def may_take(self, keys: Sequence[str], con: sqlite3.Connection) -> bool:
        """Whether a write transaction would take one of ``keys`` (or write this owner's
        ``~join`` row, while another owner is alone): a read on ``con``."""
        free, joining = self._free(keys, con)
        return bool(free) or joining

    def _free(
        self, keys: Sequence[str], con: sqlite3.Connection | None = None
    ) -> tuple[list[str], bool]:
        """The keys (in order, once each) no other live owner holds a row of (read on ``con``,
        else on this object's own connection), and whether another live owner is alone (then
        nobody else may take any of them)."""
        con = self._con if con is None else con
        wanted = list(dict.fromkeys(keys))
        if not wanted:
            return [], False
        now = time.time()
        rows = rows_with_keys(
            con, "SELECT key, owner, host, pid, process, expires FROM RagbatchLease",
            [*wanted, ALONE],
        )  # fmt: skip
        live = {row[0] for row in rows if self._is_live(row[1:], now)}
        return [key for key in wanted if key not in live], ALONE in live

    def release(self, key: str) -> None:
        """Let the lease of ``key`` go (only if this owner holds it)."""
        self.exchange([key], [])

    def close(self) -> None:
        """Let every lease of this owner go (its ``~alone`` and ``~join`` rows too), stop the
        watch and close the connection."""
        self._closing.set()
        if self._watch is not None and self._watch is not threading.current_thread():
            self._watch.join()
        with self._lock:
            _OPEN_OWNERS.discard(self.owner)
            forget(self._con)
            try:
                self._con.execute("DELETE FROM RagbatchLease WHERE owner = ?", (self.owner,))
            finally:
                self._con.close()
