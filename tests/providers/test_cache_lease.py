"""Per-key leases: callers sharing one cache directory never pay twice for one request in flight
(issue 16, item 3), and a lease whose holder is gone is taken over at once.

The two-process run (two identical CLI runs at once, one loopback server) is in
``test_cache.py``; here two cache objects in one process stand for two processes, and lease
rows left by dead, zombie, recycled-pid and other-host holders are written as such. Group
commits: test_cache_commits.py; the cache's tables: test_cache_schema.py.
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
import pytest

from ragbatch.core._errors import ProviderError
from ragbatch.core._provider import Call, Reply
from ragbatch.core._questions import build_request
from ragbatch.core._schema import Row
from ragbatch.data._jsonl import JsonlReader
from ragbatch.providers._jev import JevProvider, JevSettings
from ragbatch.providers._ratelimit import RateLimiter
from ragbatch.providers.cache._lease import _HOST, LeaseOp, Leases
from ragbatch.providers.cache._replies import CachedProvider, ReplyCache
from ragbatch.providers.cache._store import CacheOp, Committed
from ragbatch.providers.cache._writer import THREAD_EVERY, GroupCommit, LockTaken
from ragbatch.testing import Fault, JevServer
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
