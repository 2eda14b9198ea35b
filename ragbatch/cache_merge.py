"""Merge reply caches: copy verified entries from several cache directories into one (file I/O).

Distributed runs give every worker its own cache directory (no SQLite lock shared across
machines); :func:`merge_caches` folds them into one cache that an ``--offline`` replay can
read. Each entry is checked before it is copied: the header line must be
``{"format", "sha256", "key"}`` as written by :func:`ragbatch.cache.encode_entry`, the body
must match the checksum, and the header's key must equal the key the entry is stored under
(an entry copied under another request's key is not trusted). Entries that fail are skipped
and counted, never copied.

A key already in the target is left as it is (the first source that holds a key wins, in the
order given), so merging is deterministic and merging the same sources again copies nothing.
A target entry that is itself corrupt is replaced by a verified one. No network.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import diskcache
import orjson

from ragbatch.cache import FORMAT
from ragbatch.errors import CacheError, ConfigError

# The same ceiling as ReplyCache: a merged cache must never evict entries to fit.
_SIZE_LIMIT = 2**40
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
    head, sep, body = value.partition(b"\n")
    if not sep:
        return False
    try:
        meta: Any = orjson.loads(head)
    except orjson.JSONDecodeError:
        return False
    return (
        isinstance(meta, dict)
        and meta.get("format") == FORMAT
        and meta.get("key") == key
        and meta.get("sha256") == hashlib.sha256(body).hexdigest()
    )


@contextmanager
def _open(directory: Path, *, create: bool) -> Iterator[diskcache.Cache]:
    if not create and not (directory / "cache.db").is_file():
        raise CacheError(f"{directory} is not a cache directory (no cache.db); check the path")
    try:
        store = diskcache.Cache(str(directory), size_limit=_SIZE_LIMIT)
    except Exception as exc:  # diskcache raises sqlite3/OSError variants
        raise CacheError(f"cannot open cache directory {directory}: {exc}") from None
    try:
        yield store
    finally:
        store.close()


def merge_caches(sources: Sequence[Path], target: Path) -> MergeStats:
    """Copy every verified entry of ``sources`` into ``target`` (created if missing)."""
    resolved = {Path(s).resolve() for s in sources}
    if Path(target).resolve() in resolved:
        raise ConfigError(f"the merge target {target} is also a source; pick a new directory")
    read = copied = present = corrupt = 0
    with _open(Path(target), create=True) as out:
        for source in sources:
            with _open(Path(source), create=False) as store:
                pending: list[tuple[str, bytes]] = []
                for key in store.iterkeys():
                    read += 1
                    value = store.get(key)
                    if not is_valid_entry(key, value):
                        corrupt += 1
                        continue
                    if key in out and is_valid_entry(key, out.get(key)):
                        present += 1
                        continue
                    pending.append((key, value))
                    if len(pending) >= _BATCH:
                        copied += _write(out, pending)
                copied += _write(out, pending)
    return MergeStats(len(sources), read, copied, present, corrupt)


def _write(out: diskcache.Cache, pending: list[tuple[str, bytes]]) -> int:
    with out.transact():
        for key, value in pending:
            out.set(key, value)
    count = len(pending)
    pending.clear()
    return count
