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
them (an older ragbatch, another host) is still correct, it just may send a request twice.
"""

from __future__ import annotations

import os
import secrets
import socket
import sqlite3
import threading
import time
from collections.abc import Sequence
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

    def __init__(self, db_path: Path, ttl_s: float = 330.0) -> None:
        self.db_path = db_path
        self.ttl_s = ttl_s
        self.owner = f"{_HOST}:{os.getpid()}:{_PROCESS_TOKEN}:{secrets.token_hex(4)}"
        self._lock = threading.Lock()
        self._con = sqlite3.connect(
            db_path, timeout=_TIMEOUT_S, isolation_level=None, check_same_thread=False
        )
        # A lease need not survive a power cut: no fsync per lease (WAL stays consistent).
        self._con.execute("PRAGMA synchronous = NORMAL")
        self._con.execute(_SCHEMA)
        _OPEN_OWNERS.add(self.owner)

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
        # A plain read first when only taking: waiting takes no write lock.
        free = list(acquires) if releases else self.free(acquires)
        if not free and not releases:
            return set()
        self._con.execute("BEGIN IMMEDIATE")
        try:
            held = self.exchange_in(self._con, releases, free)
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
        con.executemany(
            "DELETE FROM RagbatchLease WHERE key = ? AND owner = ?",
            [(key, self.owner) for key in releases],
        )
        free = self.free(acquires, con)
        expires = time.time() + self.ttl_s
        con.executemany(
            "INSERT OR REPLACE INTO RagbatchLease VALUES (?, ?, ?, ?, ?, ?)",
            [(key, self.owner, _HOST, os.getpid(), _PROCESS_TOKEN, expires) for key in free],
        )
        return set(free)

    def free(self, keys: Sequence[str], con: sqlite3.Connection | None = None) -> list[str]:
        """The keys (in order, once each) no other live owner holds (read on ``con``, else on
        this object's own connection)."""
        con = self._con if con is None else con
        wanted = list(dict.fromkeys(keys))
        now = time.time()
        rows = rows_with_keys(
            con, "SELECT key, owner, host, pid, process, expires FROM RagbatchLease", wanted
        )
        live = {row[0] for row in rows if self._is_live(row[1:], now)}
        return [key for key in wanted if key not in live]

    def release(self, key: str) -> None:
        """Let the lease of ``key`` go (only if this owner holds it)."""
        self.exchange([key], [])

    def close(self) -> None:
        """Let every lease of this owner go and close the connection."""
        with self._lock:
            _OPEN_OWNERS.discard(self.owner)
            forget(self._con)
            try:
                self._con.execute("DELETE FROM RagbatchLease WHERE owner = ?", (self.owner,))
            finally:
                self._con.close()
