"""Merge reply caches: copy the entries of several cache directories into one (file I/O).

Distributed runs give every worker its own cache directory (no SQLite lock shared across
machines); :func:`merge_caches` folds them into one cache that an ``--offline`` replay can
read. A bad source leaves the target untouched:

1. Every source is verified in full first, read-only, with the checks of ``cache verify``
   (:func:`ragbatch.providers.cache._verify.verify_cache`: each entry's header, checksum and
   key, unreadable rows, SQLite's integrity check). A source it calls damaged stops the merge
   before anything is written (exit 2, naming the source and ``cache verify --repair``).
2. A new target is built aside (``.<name>.merge-<pid>`` beside it) and renamed into place
   when complete, so a failure or a ``kill -9`` leaves no target at all. An existing target
   takes every new entry in ONE SQLite transaction: all of them or none, and other
   processes using the target meanwhile (a run, a second merge) wait for the commit rather
   than lose their writes to a swapped directory.

:func:`read_entries` and :func:`store_entries` move entries as data instead, for Dask workers
that do not see the client's disk (the client sends what it holds, and stores what they send
back).

A key already in the target is left as it is (the first source that holds a key wins, in the
order given), so merging is deterministic and merging the same sources again copies nothing.
A target entry that is itself corrupt is replaced by a verified one. No network.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import diskcache

from ragbatch.core import CacheError, ConfigError
from ragbatch.providers.cache._batch import store_batch
from ragbatch.providers.cache._store import (
    SQLITE_FAILURES,
    damaged,
    open_store,
    store_error,
)
from ragbatch.providers.cache._swap import finish_interrupted_swap, sync_tree
from ragbatch.providers.cache._verify import check_entry, scan_entries, verify_cache

# Entries handed to SQLite at a time (bounded memory; the whole merge is one transaction).
_BATCH = 1000


@dataclass(frozen=True)
class MergeStats:
    """What a merge did: entries read from the sources, copied, already in the target."""

    sources: int
    entries_read: int
    copied: int
    already_present: int


def _verify_sources(sources: Sequence[Path]) -> None:
    """Every source in full, before anything is written: CacheError for the first bad one."""
    for source in sources:
        result = verify_cache(source)
        if result.is_damaged:
            raise damaged(source, result.describe())


@contextmanager
def _open_target(directory: Path) -> Iterator[diskcache.Cache]:
    """The target, read-write, inside one transaction (rolled back on any failure); a SQLite
    failure while merging is a CacheError (damaged)."""
    store = open_store(directory)
    try:
        with store.transact():
            yield store
    except (*SQLITE_FAILURES, diskcache.Timeout) as exc:
        raise store_error(directory, exc) from None
    finally:
        store.close()


def _copy(sources: Sequence[Path], out: diskcache.Cache) -> MergeStats:
    read = copied = present = 0
    for source in sources:
        with scan_entries(source) as entries:
            pending: list[tuple[str, bytes]] = []
            for status, key, value in entries:
                read += 1
                if status != "ok" or value is None:  # changed since it was verified
                    raise damaged(source, f"entry {read} no longer checks out")
                if key in out and check_entry(key, out.get(key)) == "ok":
                    present += 1
                    continue
                pending.append((key, value))
                if len(pending) >= _BATCH:
                    copied += store_batch(out, pending)
            copied += store_batch(out, pending)
    return MergeStats(len(sources), read, copied, present)


def _build_aside(sources: Sequence[Path], target: Path) -> MergeStats:
    """A new target, built beside it and renamed into place once complete."""
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.with_name(f".{target.name}.merge-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    try:
        with _open_target(staging) as out:
            stats = _copy(sources, out)
        sync_tree(staging)
        os.rename(staging, target)
    except OSError as exc:
        raise CacheError(
            f"cannot create the merged cache {target}: {exc.strerror or exc}"
        ) from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return stats


def merge_caches(sources: Sequence[Path], target: Path) -> MergeStats:
    """Copy every entry of ``sources`` into ``target`` (created if missing): all or nothing."""
    sources = [Path(s) for s in sources]
    target = Path(target)
    if target.resolve() in {s.resolve() for s in sources}:
        raise ConfigError(f"the merge target {target} is also a source; pick a new directory")
    _verify_sources(sources)
    finish_interrupted_swap(target)  # else a half-swapped target would look missing
    if not target.exists():
        return _build_aside(sources, target)
    with _open_target(target) as out:
        return _copy(sources, out)


def read_entries(directory: Path) -> list[tuple[str, bytes]]:
    """Every intact entry of the cache in ``directory``, read-only (none when there is no
    cache there); an entry that fails :func:`~ragbatch.providers.cache._verify.check_entry`
    is left out."""
    if not (directory / "cache.db").is_file():
        return []
    with scan_entries(directory) as entries:
        return [(k, v) for status, k, v in entries if status == "ok" and v is not None]


def store_entries(directory: Path, entries: Sequence[tuple[str, bytes]]) -> int:
    """Store ``entries`` in the cache in ``directory`` (created if missing) in one
    transaction: how many."""
    if not entries:
        return 0
    store = open_store(directory)
    try:
        return store_batch(store, list(entries))
    finally:
        store.close()
