"""The cache's group commits: a store, its release and the next takes are one transaction; the
acquiring commit says which taken keys have an entry; a poll reads first; after an inline
commit a write or a read still waits for a lock held elsewhere.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import diskcache
import pytest

from ragbatch.core._errors import CacheError
from ragbatch.providers.cache._lease import Leases
from ragbatch.providers.cache._replies import CachePath, ReplyCache
from ragbatch.providers.cache._writer import LockTaken
from tests.providers.full_disk import entries_refused

# -- a group commit is one transaction ------------------------------------------------------------


def test_a_store_and_its_release_commit_together_with_the_next_takes(tmp_path: Path) -> None:
    cache, other = ReplyCache(tmp_path / "cache"), ReplyCache(tmp_path / "cache")
    assert cache.acquire_lease("k1")
    done = cache.commit_ops([("store", "k1", b"reply"), ("acquire", "k2", None)])
    assert done.acquired == {"k2"} and done.store_error is None
    assert cache.get("k1") == b"reply"
    assert other.acquire_leases(["k1", "k2"]) == {"k1"}  # k1 let go, k2 held
    cache.close()
    other.close()


def test_a_failed_store_keeps_its_lease_and_still_takes_the_others(tmp_path: Path) -> None:
    cache, other = ReplyCache(tmp_path / "cache"), ReplyCache(tmp_path / "cache")
    assert cache.acquire_leases(["k1", "k3"]) == {"k1", "k3"}
    with entries_refused(tmp_path / "cache"):
        done = cache.commit_ops(
            [("store", "k1", b"reply"), ("release", "k3", None), ("acquire", "k2", None)]
        )
    assert done.acquired == {"k2"} and done.store_error is not None
    assert "full" in str(done.store_error)
    assert cache.get("k1") is None
    # k1 is still this owner's (its row lets it go itself); k3 was let go; k2 was taken
    assert other.acquire_leases(["k1", "k2", "k3"]) == {"k3"}
    cache.close()
    other.close()


def test_a_failed_lease_exchange_stores_nothing_of_its_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = ReplyCache(tmp_path / "cache")
    assert cache.acquire_lease("k1")

    def broken(*args: object) -> set[str]:
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(Leases, "exchange_in", broken)
    done = cache.commit_ops([("store", "k1", b"reply")])
    assert done.store_error is not None and cache.get("k1") is None  # rolled back together
    cache.close()


# -- the acquiring commit says whether there is an entry to read ---------------------------------


def test_an_acquiring_commit_says_which_taken_keys_have_an_entry(tmp_path: Path) -> None:
    cache, other = ReplyCache(tmp_path / "cache"), ReplyCache(tmp_path / "cache")
    other.put("k1", b"stored before the take")
    done = cache.commit_ops([("acquire", "k1", None), ("acquire", "k2", None)])
    assert done.acquired == {"k1", "k2"} and done.stored == {"k1"}
    # the same inside a commit that also stores (one transaction)
    other.put("k3", b"also there")
    done = cache.commit_ops([("store", "k1", b"mine"), ("acquire", "k3", None)])
    assert done.acquired == {"k3"} and done.stored == {"k3"}
    cache.close()
    other.close()


class CountedPath(CachePath[bytes]):
    """Counts reads; ``before_claim`` runs right after the first lookup missed."""

    def __init__(self, cache: ReplyCache, before_claim: Callable[[], None] = lambda: None) -> None:
        super().__init__(cache)
        self.reads, self.before_claim = 0, before_claim

    def lookup(self, key: str, decode: Callable[[bytes], bytes]) -> bytes | None:
        self.reads += 1
        found = super().lookup(key, decode)
        if self.reads == 1:
            self.before_claim()
        return found


async def fetch_once(path: CountedPath, sent: list[str]) -> bytes:
    async def send() -> bytes:
        sent.append("k")
        return b"fetched"

    return await path.fetch("k", bytes, bytes, send, lambda hit: hit)


@pytest.mark.anyio
@pytest.mark.parametrize("new", [False, True], ids=["cache-with-entries", "new-cache"])
async def test_a_miss_reads_the_cache_once_when_the_take_found_no_entry(
    tmp_path: Path, new: bool
) -> None:
    """No second read after the lease was taken; none at all alone in a new cache."""
    cache = ReplyCache(tmp_path / "cache")
    if not new:
        cache.put("another", b"stored before")
    path, sent = CountedPath(cache), list[str]()
    assert await fetch_once(path, sent) == b"fetched"
    assert path.reads == (0 if new else 1) and sent == ["k"]
    path.cache.close()


@pytest.mark.anyio
async def test_an_entry_stored_between_the_miss_and_the_take_is_read_not_sent(
    tmp_path: Path,
) -> None:
    """Another process stores the entry (and lets its lease go) after this one's lookup
    missed and before it takes the lease: the taking commit sees the entry, so it is read."""
    other = ReplyCache(tmp_path / "cache")
    sent: list[str] = []
    assert other.acquire_lease("k")  # it is fetching "k": this one leases in rows

    def theirs_stored() -> None:
        other.put("k", b"theirs")
        other.release_lease("k")

    path = CountedPath(ReplyCache(tmp_path / "cache"), theirs_stored)
    assert await fetch_once(path, sent) == b"theirs"
    assert path.reads == 2 and sent == []
    with sqlite3.connect(tmp_path / "cache" / "cache.db") as con:  # the lease was let go
        assert con.execute("SELECT count(*) FROM RagbatchLease").fetchone() == (0,)
    path.cache.close()
    other.close()


def test_a_poll_reads_first_and_a_first_take_writes_at_once(tmp_path: Path) -> None:
    """Rows waiting for another owner's lease (``poll``) take no write lock while it is
    held; a first take goes straight to the write transaction (no read before it)."""
    ours, theirs = ReplyCache(tmp_path / "cache"), ReplyCache(tmp_path / "cache")
    key = "k" * 64
    assert theirs.acquire_lease(key)
    blocker = sqlite3.connect(tmp_path / "cache" / "cache.db", isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")  # another writer holds the lock
    try:
        assert ours.commit_ops([("poll", key, None)], wait=False).acquired == set()
        with pytest.raises(LockTaken):
            ours.commit_ops([("acquire", key, None)], wait=False)
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert ours.commit_ops([("poll", key, None)], wait=False).acquired == set()  # still held
    theirs.release_lease(key)
    assert ours.commit_ops([("poll", key, None)], wait=False).acquired == {key}
    ours.close()
    theirs.close()


def _later(after_s: float, *statements: str, con: sqlite3.Connection) -> threading.Thread:
    """Run ``statements`` on ``con`` after ``after_s``, from a thread."""

    def run() -> None:
        time.sleep(after_s)
        for statement in statements:
            con.execute(statement).fetchall()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_after_an_inline_commit_a_waiting_write_and_a_read_still_wait(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The inline commit leaves its connection in the no-wait state (no lock wait, no
    checkpoint) rather than switching it back every commit; what may wait on the same
    connection afterwards (a store from ``wait=True``, a delete, a lookup) waits for a lock
    held elsewhere instead of failing."""
    cache = ReplyCache(tmp_path / "cache")
    cache.commit_ops([("store", "k1", b"v1")], wait=False)
    con = cache._store._con  # type: ignore[union-attr]  # writable
    assert con.execute("PRAGMA busy_timeout").fetchone() == (0,)
    assert con.execute("PRAGMA wal_autocheckpoint").fetchone() == (0,)
    blocker = sqlite3.connect(
        tmp_path / "cache" / "cache.db", isolation_level=None, check_same_thread=False
    )
    blocker.execute("BEGIN IMMEDIATE")
    thread = _later(0.3, "COMMIT", con=blocker)
    started = time.monotonic()
    cache.put_many([("k2", b"v2")])  # waits for the other writer, then stores
    assert time.monotonic() - started >= 0.25
    thread.join()
    assert con.execute("PRAGMA busy_timeout").fetchone()[0] > 0
    cache.commit_ops([("store", "k3", b"v3")], wait=False)  # no-wait again
    # a WAL reader meets a lock only while another connection recovers the WAL (hard to
    # provoke while connected): the first lookup that does, waits and reads again
    real_get = diskcache.Cache.get
    refusals = [sqlite3.OperationalError("database is locked")]

    def get_once_locked(self: diskcache.Cache, *args: Any, **kwargs: Any) -> Any:
        if refusals:
            raise refusals.pop()
        return real_get(self, *args, **kwargs)

    monkeypatch.setattr(diskcache.Cache, "get", get_once_locked)
    assert cache.get("k3") == b"v3"
    assert con.execute("PRAGMA busy_timeout").fetchone()[0] > 0
    refusals.append(sqlite3.OperationalError("database is locked"))
    with pytest.raises(CacheError, match="locked"):  # a connection that waits already: fails
        cache.get("k3")
    monkeypatch.undo()
    blocker.close()
    cache.commit_ops([("store", "k4", b"v4")], wait=False)
    cache.delete("k4")
    assert [cache.get(k) for k in ("k1", "k2", "k4")] == [b"v1", b"v2", None]
    cache.close()
