"""Check every entry of a cache directory, and rebuild a damaged one (file I/O).

:func:`verify_cache` opens ``cache.db`` read-only (it never changes a byte) and reads it row
by row: an entry is ``ok`` (header, checksum and key check out, as for a cache hit),
``corrupt`` (readable, but not to be trusted: a run drops and refetches it) or ``unreadable``
(SQLite cannot read the row: a damaged page). SQLite's own ``integrity_check`` covers the
indexes (an index that lost a key hides an intact entry from a lookup) and free pages. When the table cannot be scanned from one end to the other, every rowid up to
the highest one found is read on its own, so one damaged page costs only the rows on it.

:func:`repair_cache` copies the ``ok`` entries into a new store beside the directory and
swaps it in; corrupt and unreadable entries are dropped (a rerun fetches them again). No other
process may use the directory meanwhile. A database whose schema cannot be read at all is
rebuilt empty.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ragbatch.core.errors import CacheError
from ragbatch.providers.cache import check_entry
from ragbatch.providers.cache_store import (
    DB_NAME,
    connect_read_only,
    open_store,
    read_value,
    store_batch,
)

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


@dataclass(frozen=True)
class RepairResult:
    kept: int
    dropped: int


def _status(key: object, value: bytes | None) -> str:
    if not isinstance(key, str) or value is None:
        return "corrupt"
    try:
        check_entry(value, key)  # numbers out of range are corrupt, as in a fresh reply
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
        "SELECT max(rowid) FROM Cache INDEXED BY Cache_store_time",
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
        yield _status(key, data), key if isinstance(key, str) else "", data
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
    if not (directory / DB_NAME).is_file():
        raise CacheError(f"{directory} is not a cache directory (no {DB_NAME}); check the path")
    try:
        return connect_read_only(directory)
    except CacheError:
        return None


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
    old = directory.with_name(f".{directory.name}.damaged-{os.getpid()}")
    try:
        os.replace(directory, old)
    except OSError as exc:
        raise CacheError(
            f"cannot replace {directory} by its repaired copy ({exc.strerror or exc}); the "
            f"repaired copy is {staging}"
        ) from None
    os.replace(staging, directory)
    shutil.rmtree(old, ignore_errors=True)
    return RepairResult(kept, dropped)
