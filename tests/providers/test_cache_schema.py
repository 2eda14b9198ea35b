"""The reply cache's tables: lean for a new cache (no store-time index, leases without rowid),
and a cache made with the earlier schema is used as it is.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import diskcache

from ragbatch.providers.cache._replies import ReplyCache


def schema(db: Path) -> dict[str, str]:
    with sqlite3.connect(db) as con:
        return {name: sql for name, sql in con.execute("SELECT name, sql FROM sqlite_master")}


def test_a_new_cache_keeps_no_store_time_index_and_leases_without_rowid(tmp_path: Path) -> None:
    cache = ReplyCache(tmp_path / "cache")
    assert cache.acquire_lease("k")
    tables = schema(tmp_path / "cache" / "cache.db")
    assert "Cache_store_time" not in tables  # one index less to update a write
    assert tables["RagbatchLease"].endswith("WITHOUT ROWID")
    cache.close()


def test_a_cache_made_with_the_earlier_schema_is_used_as_it_is(tmp_path: Path) -> None:
    old = diskcache.Cache(str(tmp_path / "cache"))  # least-recently-stored: its index
    old.set("k0", b"earlier")
    old.close()
    with sqlite3.connect(tmp_path / "cache" / "cache.db") as con:  # the lease table of before
        con.execute(
            "CREATE TABLE RagbatchLease (key TEXT PRIMARY KEY, owner TEXT NOT NULL,"
            " host TEXT NOT NULL, pid INTEGER NOT NULL, process TEXT NOT NULL,"
            " expires REAL NOT NULL)"
        )
    cache, other = ReplyCache(tmp_path / "cache"), ReplyCache(tmp_path / "cache")
    assert cache.get("k0") == b"earlier"
    assert cache.acquire_lease("k1") and not other.acquire_lease("k1")
    done = cache.commit_ops([("store", "k1", b"reply"), ("acquire", "k2", None)])
    assert done.acquired == {"k2"} and done.store_error is None
    assert other.get("k1") == b"reply" and other.acquire_leases(["k1", "k2"]) == {"k1"}
    tables = schema(tmp_path / "cache" / "cache.db")
    assert "Cache_store_time" in tables and "WITHOUT ROWID" not in tables["RagbatchLease"]
    cache.close()
    other.close()
