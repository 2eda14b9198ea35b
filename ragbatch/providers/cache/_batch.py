"""Entries written to a diskcache store in one transaction, faster than ``Cache.set`` one by
one (file I/O, SQLite): the reply cache's group commits, ``cache merge`` and ``cache verify
--repair`` all write through :func:`store_batch` / :func:`store_then`."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from typing import TypeVar

import diskcache

from ragbatch.providers.cache._lease import rows_with_keys
from ragbatch.providers.cache._writer import LockTaken, may_wait, no_wait

T = TypeVar("T")

# diskcache's value modes: the bytes in the row, or the bytes in a file next to it.
MODE_RAW, MODE_BINARY = 1, 2


def store_batch(
    store: diskcache.Cache, entries: list[tuple[str, bytes]], *, wait: bool = True
) -> int:
    """Store ``entries`` in one transaction (one commit), then empty the list: how many.
    ``wait=False``: :class:`LockTaken` instead of waiting for another writer, no checkpoint."""
    count = len(entries)
    store_then(store, entries, lambda con: None, wait=wait)
    return count


def store_then(
    store: diskcache.Cache,
    entries: list[tuple[str, bytes]],
    then: Callable[[sqlite3.Connection], T],
    *,
    wait: bool = True,
) -> T:
    """:func:`store_batch`, and ``then`` run on the transaction's connection before it
    commits (one commit for both): what ``then`` returned."""
    if wait:
        may_wait(store._con, store._timeout)  # diskcache's connection of this thread
        result = _store_all(store, entries, then)
    else:
        with no_wait(store._con):
            try:
                result = _store_all(store, entries, then)
            except diskcache.Timeout:  # diskcache's word for BEGIN IMMEDIATE refused
                raise LockTaken("the cache's write lock is taken") from None
    entries.clear()
    return result


# diskcache's row for a new str key, its value in the row (``Disk.put``, ``Disk.store``): its
# triggers keep the Settings count and size as ``Cache.set`` does
_INSERT_ROWS = (
    "INSERT INTO Cache(key, raw, store_time, expire_time, access_time, access_count, tag,"
    f" size, mode, filename, value) VALUES (?, 1, ?, NULL, ?, 0, NULL, 0, {MODE_RAW}, NULL, ?)"
)


def _store_all(
    store: diskcache.Cache,
    entries: list[tuple[str, bytes]],
    then: Callable[[sqlite3.Connection], T],
) -> T:
    """Every entry, then ``then``, in one transaction. A new key whose value fits in the row
    (nearly all: a reply's entry is ~0.6 KB) is one row of one ``executemany`` INSERT:
    ``Cache.set`` reads each key before it writes it, which costs more than the insert itself.
    A key already there
    (``--cache refresh``, a race lost to another process) and a value diskcache keeps in a
    file go through ``Cache.set``, which replaces the old row and removes its file."""
    with store.transact():
        con = store._con
        latest = dict(entries)  # a key twice: the last value, as one set after another
        limit, now = store.disk_min_file_size, time.time()
        small = [key for key, value in latest.items() if len(value) < limit]
        present = {
            k for (k,) in rows_with_keys(con, "SELECT key FROM Cache", small, " AND raw = 1")
        }
        con.executemany(_INSERT_ROWS, [(k, now, now, latest[k]) for k in small if k not in present])
        for key, value in latest.items():
            if key in present or len(value) >= limit:
                store.set(key, value)
        return then(con)
