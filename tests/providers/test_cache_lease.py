"""Per-key leases: callers sharing one cache directory never pay twice for one request in flight
(issue 16, item 3), and a lease whose holder is gone is taken over at once.

The two-process run (two identical CLI runs at once, one loopback server) is in
``test_cache.py``; here two cache objects in one process stand for two processes, and lease
rows left by dead, zombie, recycled-pid and other-host holders are written as such.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
import diskcache
import pytest

from ragbatch.core._errors import CacheError, ProviderError
from ragbatch.core._provider import Call, Reply
from ragbatch.core._questions import build_request
from ragbatch.core._schema import Row
from ragbatch.data._jsonl import JsonlReader
from ragbatch.providers._jev import JevProvider, JevSettings
from ragbatch.providers._ratelimit import RateLimiter
from ragbatch.providers.cache._lease import _HOST, LeaseOp, Leases
from ragbatch.providers.cache._replies import CachedProvider, CachePath, ReplyCache
from ragbatch.providers.cache._store import CacheOp, Committed
from ragbatch.providers.cache._writer import THREAD_EVERY, GroupCommit, LockTaken
from ragbatch.testing import Fault, JevServer
from tests.providers.full_disk import entries_refused
from tests.providers.owners import another_owner

ROOT = Path(__file__).resolve().parents[2]
ROWS: list[Row] = list(JsonlReader(ROOT / "datasets" / "rag-fixture.jsonl"))
MODEL = "jev-1.13.0"
KEY = "test-key"

StartServer = Callable[..., JevServer]


def call(index: int = 0) -> Call:
    return Call(request=build_request(ROWS[index], MODEL), row=ROWS[index])


def provider(server: JevServer, cache: ReplyCache) -> CachedProvider:
    settings = JevSettings(api_key=KEY, base_url=server.base_url, model=MODEL)
    return CachedProvider(JevProvider(settings, RateLimiter(4)), cache)


def opened(cached: CachedProvider) -> CachedProvider:
    """``cached`` with its leases open, as its first fetch opens them: in rows beside another
    owner (``another_owner``), else alone."""
    assert cached.path is not None
    cached.path.open_leases()
    return cached


def commit_group(cached: CachedProvider) -> GroupCommit[Any, Any]:
    """The group commit of a provider's cache (its leases and writes)."""
    assert cached.path is not None and cached.path._commits is not None
    return cached.path._commits


def write_lease(db: Path, key: str, *, host: str, pid: int, process: str, expires: float) -> None:
    """A lease row as another holder leaves it."""
    Leases(db).close()  # the table
    with sqlite3.connect(db) as con:
        con.execute(
            "INSERT INTO RagbatchLease VALUES (?, ?, ?, ?, ?, ?)",
            (key, f"{host}:{pid}:{process}:x", host, pid, process, expires),
        )


def waiting(providers: list[CachedProvider]) -> int:
    """How many times these providers waited for another one's lease."""
    return sum(p.stats.deduplicated for p in providers)


def held_until(
    is_waiting: Callable[[], bool], fault: Fault | None = None
) -> Callable[[int, dict[str, Any]], Fault | None]:
    """A fault script that keeps the first request at the server until the second caller is
    waiting for its lease (event-driven: no timing guess), then answers it (or ``fault``)."""

    def script(index: int, body: dict[str, Any]) -> Fault | None:
        deadline = time.monotonic() + 10
        while index == 0 and not is_waiting() and time.monotonic() < deadline:
            time.sleep(0.005)
        return fault if index == 0 else None

    return script


async def race(a: CachedProvider, b: CachedProvider) -> dict[str, Reply | Exception]:
    """``a`` and ``b`` fetch the same request at once; what each got."""
    outcome: dict[str, Reply | Exception] = {}

    async def fetch(name: str, cached: CachedProvider) -> None:
        try:
            outcome[name] = await cached.fetch_answers(call())
        except ProviderError as exc:
            outcome[name] = exc

    async with anyio.create_task_group() as tg:
        tg.start_soon(fetch, "a", a)
        tg.start_soon(fetch, "b", b)
    await a.aclose()
    await b.aclose()
    return outcome


@pytest.mark.anyio
async def test_two_cache_objects_on_one_directory_send_one_request(
    start_jev_server: StartServer, tmp_path: Path
) -> None:
    both: list[CachedProvider] = []
    server = start_jev_server(fault_fn=held_until(lambda: waiting(both) > 0))
    both += [provider(server, ReplyCache(tmp_path / "cache")) for _ in range(2)]
    replies = await race(*both)
    assert server.requests_total == 1
    fresh, cached = sorted(replies.values(), key=lambda r: isinstance(r, Reply) and r.cached)
    assert isinstance(fresh, Reply) and isinstance(cached, Reply)
    assert fresh.answers == cached.answers and not fresh.cached and cached.cached
    stats = [(p.stats.deduplicated, p.stats.hits, p.stats.misses) for p in both]
    assert sorted(stats) == [(0, 0, 1), (1, 1, 0)]
    with sqlite3.connect(tmp_path / "cache" / "cache.db") as con:
        assert con.execute("SELECT count(*) FROM RagbatchLease").fetchone() == (0,)


@pytest.mark.anyio
async def test_a_failed_holder_lets_the_waiter_send_it(
    start_jev_server: StartServer, tmp_path: Path
) -> None:
    """Errors are never cached: when the holder's call fails, the waiter sends its own."""
    both: list[CachedProvider] = []
    refused = Fault(kind="status", status=422, message="no")
    server = start_jev_server(fault_fn=held_until(lambda: waiting(both) > 0, refused))
    both += [provider(server, ReplyCache(tmp_path / "cache")) for _ in range(2)]
    outcome = await race(*both)
    kinds = sorted(type(o).__name__ for o in outcome.values())
    assert kinds == ["ProviderError", "Reply"]
    assert server.requests_total == 2 and waiting(both) == 1


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def zombie_pid() -> tuple[int, subprocess.Popen[bytes]]:
    """A child that has exited but is not reaped yet (a killed run before its parent waits)."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        stat = Path(f"/proc/{proc.pid}/stat").read_text()
        if stat.rpartition(")")[2].split()[0] == "Z":
            break
        time.sleep(0.01)
    return proc.pid, proc


@pytest.mark.parametrize("holder", ["dead", "zombie", "recycled-pid", "expired-other-host"])
def test_a_lease_whose_holder_is_gone_is_taken_over_at_once(tmp_path: Path, holder: str) -> None:
    cache = ReplyCache(tmp_path / "cache")
    later = time.time() + 3600
    zombie = None
    if holder == "dead":
        write_lease(cache.db_path, "k", host=_HOST, pid=dead_pid(), process="p", expires=later)
    elif holder == "zombie":
        pid, zombie = zombie_pid()
        write_lease(cache.db_path, "k", host=_HOST, pid=pid, process="p", expires=later)
    elif holder == "recycled-pid":  # a dead run whose pid this process got
        write_lease(cache.db_path, "k", host=_HOST, pid=os.getpid(), process="old", expires=later)
    else:
        write_lease(cache.db_path, "k", host="elsewhere", pid=1, process="p", expires=time.time())
    try:
        assert cache.acquire_lease("k")
    finally:
        if zombie is not None:
            zombie.wait()
        cache.close()


@pytest.mark.parametrize("holder", ["live-other-host", "live-process", "other-cache-object"])
def test_a_live_holder_keeps_its_lease(tmp_path: Path, holder: str) -> None:
    cache = ReplyCache(tmp_path / "cache")
    later = time.time() + 3600
    other, sibling = None, None
    if holder == "live-other-host":
        write_lease(cache.db_path, "k", host="elsewhere", pid=1, process="p", expires=later)
    elif holder == "live-process":
        other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
        write_lease(cache.db_path, "k", host=_HOST, pid=other.pid, process="p", expires=later)
    else:
        sibling = ReplyCache(tmp_path / "cache")
        assert sibling.acquire_lease("k")
    try:
        assert not cache.acquire_lease("k")
        assert cache.acquire_lease("other-key")
        if sibling is not None:
            sibling.release_lease("k")
            assert cache.acquire_lease("k")
            sibling.close()
    finally:
        if other is not None:
            other.kill()
            other.wait()
        cache.close()


def test_one_transaction_lets_leases_go_and_takes_others(tmp_path: Path) -> None:
    cache, other = ReplyCache(tmp_path / "cache"), ReplyCache(tmp_path / "cache")
    try:
        assert cache.exchange_leases([("acquire", "a"), ("acquire", "b")]) == {"a", "b"}
        assert other.exchange_leases([("acquire", "a"), ("acquire", "x")]) == {"x"}
        # releases come first: a key let go and taken back in one batch stays ours
        batch: list[tuple[LeaseOp, str]] = [
            ("release", "a"),
            ("acquire", "c"),
            ("release", "b"),
            ("acquire", "b"),
        ]
        assert cache.exchange_leases(batch) == {"b", "c"}
        assert other.exchange_leases([("acquire", "a"), ("acquire", "b")]) == {"a"}
    finally:
        cache.close()
        other.close()


@pytest.mark.anyio
async def test_concurrent_misses_share_lease_transactions(
    start_jev_server: StartServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = start_jev_server()
    cache = ReplyCache(tmp_path / "cache")
    gate, sizes, stored = threading.Event(), list[int](), list[int]()
    commit_ops = cache.commit_ops

    def first_one_slow(ops: Sequence[CacheOp], *, wait: bool = True) -> Committed:
        if not wait:  # as if another process held the lock: every commit goes to the thread
            raise LockTaken("held elsewhere")
        storing = sum(op == "store" for op, _, _ in ops)
        if storing:
            stored.append(storing)
        else:
            if not sizes:
                gate.wait(10)  # the other rows' leases pile up behind the first commit
            sizes.append(len(ops))
        return commit_ops(ops)

    monkeypatch.setattr(cache, "commit_ops", first_one_slow)
    settings = JevSettings(api_key=KEY, base_url=server.base_url, model=MODEL)
    with another_owner(tmp_path / "cache"):  # leases in rows, each take a commit
        cached = opened(CachedProvider(JevProvider(settings, RateLimiter(40)), cache))
    leases = commit_group(cached)
    async with anyio.create_task_group() as tg:
        tg.start_soon(cached.fetch_answers, call(0))
        with anyio.fail_after(10):
            while not leases.committing:  # the first take, alone, waits at the gate
                await anyio.sleep(0.01)
        for index in range(1, 40):
            tg.start_soon(cached.fetch_answers, call(index))
        with anyio.fail_after(10):
            while leases.pending < 39:
                await anyio.sleep(0.01)
        gate.set()
    assert server.successful == 40 and cached.stats.misses == 40
    # the first take alone, then the 39 that waited in one transaction; the 40 releases
    # after, each in the transaction that stores its row's reply
    assert sizes == [1, 39] and sum(stored) == 40
    await cached.aclose()


@pytest.mark.anyio
@pytest.mark.parametrize("shared", [False, True], ids=["alone", "shared"])
async def test_a_write_lock_held_elsewhere_sends_commits_to_the_thread_not_the_loop(
    start_jev_server: StartServer, tmp_path: Path, shared: bool
) -> None:
    """Commits run on the event loop only while nobody else holds the write lock: with it held
    by another connection (another process), they give way to the thread, which waits for it,
    and the loop keeps running meanwhile. Nothing is reported before it is committed. Alone,
    a row's one commit is its store; shared, its lease is taken in a commit too."""
    server = start_jev_server()
    cache = ReplyCache(tmp_path / "cache")
    with another_owner(tmp_path / "cache") if shared else contextlib.nullcontext():
        cached = opened(provider(server, cache))
    commits = commit_group(cached)
    await cached.fetch_answers(call(0))  # no one else: on the loop
    assert commits.commits == (2 if shared else 1)
    assert commits.threaded == 0 and commits.gave_way == 0

    other = sqlite3.connect(cache.db_path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another process's write transaction
    ticks, done = 0, list[int]()

    async def fetch(index: int) -> None:
        await cached.fetch_answers(call(index))
        done.append(index)

    async with anyio.create_task_group() as tg:
        for index in range(1, 5):
            tg.start_soon(fetch, index)
        with anyio.fail_after(10):
            while commits.gave_way == 0:
                await anyio.sleep(0.005)
        for _ in range(20):  # the loop runs while the thread waits for the lock
            await anyio.sleep(0.005)
            ticks += 1
        assert done == []  # nothing acknowledged before its commit
        other.execute("COMMIT")
    other.close()
    assert ticks == 20 and sorted(done) == [1, 2, 3, 4]
    assert commits.gave_way >= 1 and commits.threaded >= 1
    assert server.successful == 5
    check = ReplyCache(tmp_path / "cache", read_only=True)
    assert all(check.get(cached.key_for(call(i))) is not None for i in range(5))
    check.close()
    await cached.aclose()


@pytest.mark.anyio
@pytest.mark.parametrize("shared", [False, True], ids=["alone", "shared"])
async def test_every_so_many_commits_run_in_the_thread_for_its_wal_checkpoints(
    start_jev_server: StartServer, tmp_path: Path, shared: bool
) -> None:
    with another_owner(tmp_path / "cache") if shared else contextlib.nullcontext():
        cached = opened(provider(start_jev_server(), ReplyCache(tmp_path / "cache")))
    commits = commit_group(cached)
    for index in range(THREAD_EVERY):  # one at a time: a commit a row alone, shared two
        await cached.fetch_answers(call(index))
    a_row = 2 if shared else 1
    assert commits.commits == a_row * THREAD_EVERY
    assert commits.threaded == a_row and commits.gave_way == 0
    await cached.aclose()


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


# -- the schema: lean for a new cache, an older one still works -----------------------------------


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
