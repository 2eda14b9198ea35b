"""The batch INSERT of new entries writes the rows diskcache's own ``set`` writes."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

from ragbatch.providers.cache._store import ReplyCache, open_store

COLUMNS = "key, raw, expire_time, access_count, tag, size, mode, filename, value"


def table(directory: Path) -> tuple[list[tuple[object, ...]], dict[str, object]]:
    """Every entry row (the columns that do not hold a time) and diskcache's count and size."""
    with closing(sqlite3.connect(directory / "cache.db")) as con:
        rows = con.execute(f"SELECT {COLUMNS} FROM Cache ORDER BY key").fetchall()
        settings = dict(
            con.execute("SELECT key, value FROM Settings WHERE key IN ('count', 'size')")
        )
    return rows, settings


def entries(count: int, size: int = 900) -> list[tuple[str, bytes]]:
    return [(f"{i:064x}", bytes([i % 251]) * (size + i)) for i in range(count)]


def test_new_entries_are_the_rows_diskcache_writes(tmp_path: Path) -> None:
    batch = entries(40)
    ours = ReplyCache(tmp_path / "ours")
    ours.put_many(batch)
    ours.close()
    store = open_store(tmp_path / "reference")  # the store a ReplyCache opens
    for key, value in batch:
        store.set(key, value)
    store.close()
    assert table(tmp_path / "ours") == table(tmp_path / "reference")
    reopened = ReplyCache(tmp_path / "ours")
    assert all(reopened.get(key) == value for key, value in batch)
    assert len(reopened) == 40
    reopened.close()


def test_a_stored_key_is_replaced_and_counted_once(tmp_path: Path) -> None:
    cache = ReplyCache(tmp_path / "cache")
    cache.put_many(entries(3))
    cache.put_many([(entries(1)[0][0], b"refreshed"), ("new", b"n")])
    assert cache.get(entries(1)[0][0]) == b"refreshed" and cache.get("new") == b"n"
    assert len(cache) == 4
    cache.close()
    rows, settings = table(tmp_path / "cache")
    assert settings["count"] == 4 and len(rows) == 4


def test_a_key_twice_in_one_batch_keeps_the_last_value(tmp_path: Path) -> None:
    cache = ReplyCache(tmp_path / "cache")
    cache.put_many([("k", b"first"), ("j", b"j"), ("k", b"second")])
    assert cache.get("k") == b"second" and len(cache) == 2
    cache.close()


def test_a_value_over_the_row_limit_goes_to_diskcache_s_file(tmp_path: Path) -> None:
    cache = ReplyCache(tmp_path / "cache")
    big = b"x" * 40_000  # over diskcache's 32 KiB: kept in a file of its own
    cache.put_many([("big", big), ("small", b"s")])
    assert cache.get("big") == big
    assert len(list((tmp_path / "cache").rglob("*.val"))) == 1
    cache.put_many([("big", b"now small")])  # replaced: the file goes
    assert cache.get("big") == b"now small" and cache.get("small") == b"s"
    cache.close()
    assert list((tmp_path / "cache").rglob("*.val")) == []
    rows, settings = table(tmp_path / "cache")
    assert len(rows) == settings["count"] == 2 and settings["size"] == 0
