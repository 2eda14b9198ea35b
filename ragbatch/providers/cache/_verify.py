"""Check every entry of a cache directory, and rebuild a damaged one (file I/O).

:func:`verify_cache` opens ``cache.db`` read-only (it never changes a byte) and reads it row
by row: an entry is ``ok`` (:func:`check_entry`: header, checksum and key check out, as for a
cache hit), ``corrupt`` (readable, but not to be trusted: a run drops and refetches it) or
``unreadable`` (SQLite cannot read the row: a damaged page). SQLite's own
``integrity_check`` covers the indexes (an index that lost a key hides an intact entry from a
lookup) and free pages. When the table cannot be scanned from one end to the other, every
rowid up to the highest one found is read on its own, so one damaged page costs only the rows
on it. ``cache merge`` applies the same checks to its sources (:func:`scan_entries`).

:func:`repair_cache` copies the ``ok`` entries into a new store beside the directory and
swaps it in (:func:`ragbatch.providers.cache._swap.swap_in`: journaled, so a crash between
its renames is finished by whoever opens the directory next); corrupt and unreadable entries
are dropped (a rerun fetches them again). No other process may use the directory meanwhile.
A database whose schema cannot be read at all is rebuilt empty.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ragbatch.core import CacheError
from ragbatch.providers.cache._batch import store_batch
from ragbatch.providers.cache._replies import validate_entry
from ragbatch.providers.cache._store import (
    DB_NAME,
    connect_read_only,
    damaged,
    open_store,
    read_value,
)
from ragbatch.providers.cache._swap import finish_interrupted_swap, swap_in, sync_tree

# What reading a damaged row raises (a lock or permission problem is not caught).
_DAMAGE = (sqlite3.DatabaseError, UnicodeDecodeError)
# Entries written per SQLite transaction while rebuilding.
_BATCH = 1000


@dataclass(frozen=True)
class VerifyResult:
    """What :func:`verify_cache` found; ``problem`` is SQLite's first complaint, if any."""

    entries: int
    ok: int
    corrupt: int
    unreadable: int
    problem: str | None

    @property
    def is_damaged(self) -> bool:
        return bool(self.corrupt or self.unreadable or self.problem)

    def describe(self) -> str:
        """``48 entries: 47 ok, 1 corrupt, 0 unreadable`` and SQLite's complaint, if any."""
        text = (
            f"{self.entries} entries: {self.ok} ok, {self.corrupt} corrupt, "
            f"{self.unreadable} unreadable"
        )
        if not self.problem:
            return text
        return f"{text}; SQLite: {' '.join(self.problem.split())}"  # one line, for `error:`


@dataclass(frozen=True)
class RepairResult:
    kept: int
    dropped: int


def check_entry(key: object, value: bytes | None) -> str:
    """``ok`` or ``corrupt``: the one check of a stored entry that ``cache verify``, its
    ``--repair`` and the sources of ``cache merge`` apply (extend it here, for all three)."""
    if not isinstance(key, str) or value is None:
        return "corrupt"
    try:
        validate_entry(value, key)  # numbers out of range are corrupt, as in a fresh reply
    except ValueError:
        return "corrupt"
    return "ok"


def _rowids(con: sqlite3.Connection) -> tuple[list[int], bool]:
    """The rowids of the Cache table, and whether the scan read the table to its end."""
    found: list[int] = []
    try:
        for (rowid,) in con.execute("SELECT rowid FROM Cache ORDER BY rowid"):
            found.append(int(rowid))
        return found, True
    except _DAMAGE:
        pass
    highest = max(found, default=0)
    for query in (
        "SELECT max(rowid) FROM Cache",
        "SELECT max(rowid) FROM Cache INDEXED BY Cache_store_time",  # caches before 'none'
        "SELECT max(rowid) FROM Cache INDEXED BY Cache_expire_time",
        "SELECT max(rowid) FROM Cache INDEXED BY Cache_key_raw",
    ):
        try:
            (top,) = con.execute(query).fetchone()
        except _DAMAGE:
            continue
        highest = max(highest, int(top or 0))
    return list(range(1, highest + 1)), False


def _entries(directory: Path, con: sqlite3.Connection) -> Iterator[tuple[str, str, bytes | None]]:
    """(status, key, value) of every row; key ``""`` when the row itself cannot be read."""
    rowids, complete = _rowids(con)
    for rowid in rowids:
        try:
            row = con.execute(
                "SELECT key, mode, filename, value FROM Cache WHERE rowid = ?", (rowid,)
            ).fetchone()
        except _DAMAGE:
            yield "unreadable", "", None
            continue
        if row is None:
            continue  # a gap in the rowids (deleted entries) when probing
        key, mode, filename, value = row
        data = read_value(directory, mode, filename, value)
        yield check_entry(key, data), key if isinstance(key, str) else "", data
    if not complete and not rowids:
        yield "unreadable", "", None


def _quick_check(con: sqlite3.Connection) -> str | None:
    try:
        rows = [str(r[0]) for r in con.execute("PRAGMA integrity_check(5)")]
    except _DAMAGE as exc:
        return str(exc)
    return None if rows == ["ok"] else "; ".join(rows)


def _connect(directory: Path) -> sqlite3.Connection | None:
    """A read-only connection, or None when the schema itself cannot be read."""
    finish_interrupted_swap(directory)
    if not (directory / DB_NAME).is_file():
        raise CacheError(f"{directory} is not a cache directory (no {DB_NAME}); check the path")
    try:
        return connect_read_only(directory)
    except CacheError:
        return None


@contextmanager
def scan_entries(directory: Path) -> Iterator[Iterator[tuple[str, str, bytes | None]]]:
    """(status, key, value) of every entry of ``directory``, read-only, as :func:`verify_cache`
    reads them; CacheError when it is not a cache directory or its schema cannot be read."""
    con = _connect(directory)
    if con is None:
        raise damaged(directory, "the database schema cannot be read")
    try:
        yield _entries(directory, con)
    finally:
        con.close()


def verify_cache(directory: Path) -> VerifyResult:
    """Read every entry of ``directory`` (read-only) and count what is found."""
    con = _connect(directory)
    if con is None:
        return VerifyResult(0, 0, 0, 0, "the database schema cannot be read")
    counts = {"ok": 0, "corrupt": 0, "unreadable": 0}
    try:
        for status, _, _ in _entries(directory, con):
            counts[status] += 1
        problem = _quick_check(con)
    finally:
        con.close()
    return VerifyResult(
        sum(counts.values()), counts["ok"], counts["corrupt"], counts["unreadable"], problem
    )


def repair_cache(directory: Path) -> RepairResult:
    """Rebuild ``directory`` from its ``ok`` entries; the rest is dropped."""
    directory = Path(directory)
    con = _connect(directory)
    staging = directory.with_name(f".{directory.name}.repair-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    kept = dropped = 0
    store = open_store(staging)
    try:
        pending: list[tuple[str, bytes]] = []
        for status, key, value in _entries(directory, con) if con is not None else ():
            if status != "ok" or value is None:
                dropped += 1
                continue
            pending.append((key, value))
            if len(pending) >= _BATCH:
                kept += store_batch(store, pending)
        kept += store_batch(store, pending)
    finally:
        store.close()
        if con is not None:
            con.close()
    sync_tree(staging)  # complete on disk before the journal says so
    swap_in(directory, staging, directory.with_name(f".{directory.name}.damaged-{os.getpid()}"))
    return RepairResult(kept, dropped)
