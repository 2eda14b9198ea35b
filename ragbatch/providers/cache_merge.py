"""Merge reply caches: copy verified entries from several cache directories into one (file I/O).

Distributed runs give every worker its own cache directory (no SQLite lock shared across
machines); :func:`merge_caches` folds them into one cache that an ``--offline`` replay can
read. Each entry is checked before it is copied: the header line must be
``{"format", "sha256", "key"}`` as written by :func:`ragbatch.providers.cache.encode_entry`, the body
must match the checksum, and the header's key must equal the key the entry is stored under
(an entry copied under another request's key is not trusted). Entries that fail are skipped
and counted, never copied.

Every source is opened and checked before anything is copied: a bad second source fails the
merge with the target untouched (not created when it did not exist), never half-merged.

A key already in the target is left as it is (the first source that holds a key wins, in the
order given), so merging is deterministic and merging the same sources again copies nothing.
A target entry that is itself corrupt is replaced by a verified one. No network.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import diskcache

from ragbatch.core.errors import CacheError, ConfigError
from ragbatch.providers.cache import entry_body
from ragbatch.providers.cache_store import (
    SQLITE_FAILURES,
    ReplyCache,
    open_store,
    store_batch,
    store_error,
)

# Entries written per SQLite transaction (one commit per entry is ~10x slower).
_BATCH = 1000


@dataclass(frozen=True)
class MergeStats:
    """What a merge did: entries read from the sources, copied, kept, skipped as corrupt."""

    sources: int
    entries_read: int
    copied: int
    already_present: int
    corrupt_skipped: int


def is_valid_entry(key: object, value: object) -> bool:
    """Whether ``value`` is an intact entry stored under ``key`` (header, checksum, key)."""
    if not isinstance(key, str) or not isinstance(value, bytes):
        return False
    try:
        entry_body(value, key)
    except ValueError:
        return False
    return True


@contextmanager
def _open_source(directory: Path) -> Iterator[ReplyCache]:
    """A source, read-only: merging never changes a byte of it."""
    if not (directory / "cache.db").is_file():
        raise CacheError(f"{directory} is not a cache directory (no cache.db); check the path")
    store = ReplyCache(directory, read_only=True)
    try:
        yield store
    finally:
        store.close()


@contextmanager
def _open_target(directory: Path) -> Iterator[diskcache.Cache]:
    """The target, read-write; a SQLite failure while merging is a CacheError (damaged)."""
    store = open_store(directory)
    try:
        yield store
    except (*SQLITE_FAILURES, diskcache.Timeout) as exc:
        raise store_error(directory, exc) from None
    finally:
        store.close()


def merge_caches(sources: Sequence[Path], target: Path) -> MergeStats:
    """Copy every verified entry of ``sources`` into ``target`` (created if missing)."""
    resolved = {Path(s).resolve() for s in sources}
    if Path(target).resolve() in resolved:
        raise ConfigError(f"the merge target {target} is also a source; pick a new directory")
    for source in sources:  # all of them first: a bad later source must not half-merge
        with _open_source(Path(source)):
            pass
    read = copied = present = corrupt = 0
    with _open_target(Path(target)) as out:
        for source in sources:
            with _open_source(Path(source)) as store:
                pending: list[tuple[str, bytes]] = []
                for key, value in store.entries():
                    read += 1
                    if not isinstance(key, str) or value is None:
                        corrupt += 1
                        continue
                    if not is_valid_entry(key, value):
                        corrupt += 1
                        continue
                    if key in out and is_valid_entry(key, out.get(key)):
                        present += 1
                        continue
                    pending.append((key, value))
                    if len(pending) >= _BATCH:
                        copied += store_batch(out, pending)
                copied += store_batch(out, pending)
    return MergeStats(len(sources), read, copied, present, corrupt)
