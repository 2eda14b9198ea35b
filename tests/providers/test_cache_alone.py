"""An owner alone in a cache directory leases in memory (``cache._lease``, "Alone"), and a
newcomer still never pays for a key in flight: it asks, the owner writes the lease rows of
what it holds, and from then on both lease in rows.

Two cache objects in one process stand for two processes (each is its own owner); the
two-process CLI run is ``test_cache.py``'s, the killed-and-resumed one ``run/test_resume.py``'s.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import anyio
import pytest

import ragbatch
from ragbatch.core._schema import Row
from ragbatch.data._jsonl import JsonlReader
from ragbatch.providers.cache import CachePath, ReplyCache
from ragbatch.providers.cache._lease import _HOST, _OPEN_OWNERS, ALONE, JOIN, WATCH_S, Leases
from ragbatch.testing import JevServer
from ragbatch.testing.chat_server import ChatServer
from tests.providers.owners import acquire_within, another_owner
from tests.providers.test_cache_lease import dead_pid, write_lease

ROOT = Path(__file__).resolve().parents[2]
ROWS: list[Row] = list(JsonlReader(ROOT / "datasets" / "rag-fixture.jsonl"))
PRICING = ROOT / "pricing" / "typesafe-2026-12.json"


def same(value: bytes) -> bytes:
    return value


def rows(directory: Path) -> dict[str, str]:
    """The lease table: key -> owner."""
    with closing(sqlite3.connect(directory / "cache.db")) as con:
        return dict(con.execute("SELECT key, owner FROM RagbatchLease").fetchall())


def opened(path: CachePath[bytes]) -> CachePath[bytes]:
    """``path`` with its leases open, as its first fetch opens them."""
    path.open_leases()
    return path


def leases_of(path: CachePath[bytes]) -> Leases:
    assert path._leases is not None
    return path._leases


def wait_until(condition: Callable[[], bool], seconds: float = 10) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "the condition never came true"
        time.sleep(0.005)


def test_an_owner_alone_writes_one_row_for_the_run_and_none_for_its_keys(tmp_path: Path) -> None:
    cache = ReplyCache(tmp_path / "cache")
    path = opened(CachePath[bytes](cache))
    owner = leases_of(path).owner
    during: list[dict[str, str]] = []
    sent: Counter[str] = Counter()

    async def fetch(key: str) -> bytes:
        async def send() -> bytes:
            sent[key] += 1
            await anyio.sleep(0.01)
            during.append(rows(tmp_path / "cache"))
            return b"reply " + key.encode()

        return await path.fetch(key, same, same, send, same)

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            for key in ("a", "b", "c", "a"):
                tg.start_soon(fetch, key)

    anyio.run(main)
    assert sent == {"a": 1, "b": 1, "c": 1}
    assert during == [{ALONE: owner}] * 3  # no row for the keys in flight
    assert leases_of(path).alone and path.stats.writes == 3
    cache.close()
    assert rows(tmp_path / "cache") == {}  # its row goes with it


def test_beside_another_owner_a_cache_leases_in_rows(tmp_path: Path) -> None:
    with another_owner(tmp_path / "cache"):
        path = opened(CachePath[bytes](ReplyCache(tmp_path / "cache")))
        assert not leases_of(path).alone
        assert path.cache.acquire_lease("k")
        assert rows(tmp_path / "cache")["k"] == leases_of(path).owner
        path.cache.close()


def test_a_newcomer_waits_for_a_key_in_flight_alone_and_reads_its_entry(tmp_path: Path) -> None:
    directory = tmp_path / "cache"
    first = opened(CachePath[bytes](ReplyCache(directory)))
    newcomer = opened(CachePath[bytes](ReplyCache(directory)))
    assert leases_of(first).alone and not leases_of(newcomer).alone
    sent: list[str] = []
    seen: dict[str, dict[str, str]] = {}

    async def first_send() -> bytes:
        sent.append("first")
        # The request stays out until the newcomer waits and the owner has written its row
        # (the watch saw the newcomer's ~join row).
        with anyio.fail_after(10):
            while not (newcomer.stats.deduplicated and "k" in rows(directory)):
                await anyio.sleep(0.005)
        seen["asked"] = rows(directory)
        return b"reply"

    async def newcomer_send() -> bytes:
        sent.append("newcomer")
        return b"paid twice"

    got: dict[str, bytes] = {}

    async def fetch(name: str, path: CachePath[bytes], send: Callable[[], object]) -> None:
        got[name] = await path.fetch("k", same, same, send, same)  # type: ignore[arg-type]

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(fetch, "first", first, first_send)
            with anyio.fail_after(10):
                while not sent:
                    await anyio.sleep(0.005)
            tg.start_soon(fetch, "newcomer", newcomer, newcomer_send)

    anyio.run(main)
    assert sent == ["first"] and got == {"first": b"reply", "newcomer": b"reply"}
    assert seen["asked"]["k"] == leases_of(first).owner and ALONE not in seen["asked"]
    assert not leases_of(first).alone  # it leases in rows from now on
    assert first.cache.acquire_lease("next") and rows(directory)["next"] == leases_of(first).owner
    first.cache.close()
    newcomer.cache.close()
    assert rows(directory) == {}  # the newcomer's ~join row went too


def test_keys_an_owner_alone_let_go_are_free_for_a_newcomer_and_held_ones_are_not(
    tmp_path: Path,
) -> None:
    directory = tmp_path / "cache"
    first = opened(CachePath[bytes](ReplyCache(directory)))
    leases = leases_of(first)
    assert leases.take_alone("done") and leases.take_alone("held")
    assert leases.let_go_alone("done")
    newcomer = ReplyCache(directory)
    assert acquire_within(newcomer, ["done", "held"], seconds=1) == {"done"}
    assert not leases.alone and rows(directory)["held"] == leases.owner
    first.cache.release_lease("held")  # now in rows: let go in a transaction
    assert newcomer.acquire_lease("held")
    newcomer.close()
    first.cache.close()


@pytest.mark.parametrize("state", ["dead", "expired-other-host"])
def test_an_alone_row_whose_owner_is_gone_is_not_waited_for(tmp_path: Path, state: str) -> None:
    directory = tmp_path / "cache"
    ReplyCache(directory).close()
    if state == "dead":  # a run killed while alone
        write_lease(
            directory / "cache.db", ALONE, host=_HOST, pid=dead_pid(), process="p",
            expires=time.time() + 3600,
        )  # fmt: skip
    else:
        write_lease(
            directory / "cache.db", ALONE, host="elsewhere", pid=1, process="p",
            expires=time.time(),
        )  # fmt: skip
    newcomer = ReplyCache(directory)
    assert newcomer.acquire_lease("k")  # at once: nobody to ask
    newcomer.close()
    path = opened(CachePath[bytes](ReplyCache(directory)))
    assert leases_of(path).alone and rows(directory) == {ALONE: leases_of(path).owner}
    path.cache.close()


def test_a_live_owner_alone_on_another_host_is_asked_and_waited_for(tmp_path: Path) -> None:
    directory = tmp_path / "cache"
    ReplyCache(directory).close()
    write_lease(
        directory / "cache.db", ALONE, host="elsewhere", pid=1, process="p",
        expires=time.time() + 3600,
    )  # fmt: skip
    newcomer = ReplyCache(directory)
    assert newcomer.acquire_leases(["k", "j"]) == set()
    owner = newcomer.leases().owner
    assert rows(directory)[JOIN + owner] == owner  # asked
    assert newcomer.acquire_leases(["k"]) == set()  # asking again writes the same row
    with closing(sqlite3.connect(directory / "cache.db")) as con, con:
        con.execute("DELETE FROM RagbatchLease WHERE key = ?", (ALONE,))  # it leases in rows
    assert newcomer.acquire_leases(["k"]) == {"k"}
    assert set(rows(directory)) == {"k"}  # the ~join row is gone with the take
    newcomer.close()


def test_an_owner_alone_whose_row_was_taken_over_writes_its_rows(tmp_path: Path) -> None:
    directory = tmp_path / "cache"
    path = opened(
        CachePath[bytes](ReplyCache(directory, lease_s=3 * WATCH_S))
    )  # renewed every watch
    leases = leases_of(path)
    assert leases.alone and leases.take_alone("held")
    with closing(sqlite3.connect(directory / "cache.db")) as con, con:
        con.execute("DELETE FROM RagbatchLease WHERE key = ?", (ALONE,))
    wait_until(lambda: not leases.alone)
    assert rows(directory) == {"held": leases.owner}
    path.cache.close()


def test_an_owner_alone_renews_its_row(tmp_path: Path) -> None:
    directory = tmp_path / "cache"
    path = opened(CachePath[bytes](ReplyCache(directory, lease_s=3 * WATCH_S)))

    def expires() -> float:
        with closing(sqlite3.connect(directory / "cache.db")) as con:
            (value,) = con.execute(
                "SELECT expires FROM RagbatchLease WHERE key = ?", (ALONE,)
            ).fetchone()
        return float(value)

    first = expires()
    wait_until(lambda: expires() > first)
    assert leases_of(path).alone
    path.cache.close()


def test_a_run_with_an_llm_judge_leaves_no_lease_row_and_no_watch(
    start_jev_server: Callable[..., JevServer], tmp_path: Path
) -> None:
    """The judge's cache (the run's directory, opened for the judge) is closed with the run,
    as the Jev cache is: no row, no watch, no open owner is left, also when only the judge
    had calls to make."""
    server = start_jev_server()
    open_before = set(_OPEN_OWNERS)
    with ChatServer(api_key="judge-key") as chat:
        # the second run's Jev replies are all cached: only its judge (another model) leases
        for judge_model, paid in (("gpt-4o-mini", 8), ("gpt-4o", 16)):
            ragbatch.evaluate(
                ROWS[:8], provider="jev", base_url=server.base_url, api_key="test-key",
                model="jev-1.13.0", cache_dir=tmp_path / "cache", pricing=PRICING,
                baseline="llm", judge_base_url=chat.base_url, judge_api_key="judge-key",
                judge_model=judge_model, allow_insecure_http=True,
            )  # fmt: skip
            assert chat.requests_total == paid and server.successful == 8
            assert rows(tmp_path / "cache") == {}
            assert not [t for t in threading.enumerate() if t.name == "ragbatch-lease-watch"]
            assert set(_OPEN_OWNERS) == open_before  # both caches closed, the judge's too


def test_alone_in_a_new_cache_a_key_never_held_is_unstored_and_every_other_is_looked_up(
    tmp_path: Path,
) -> None:
    directory = tmp_path / "cache"
    path = opened(CachePath[bytes](ReplyCache(directory)))
    leases = leases_of(path)
    assert leases.alone and leases.unstored("k") and leases.unstored("j")
    assert leases.take_alone("k")
    assert not leases.unstored("k") and leases.unstored("j")
    assert leases.let_go_alone("k") and not leases.unstored("k")  # it may have been stored
    newcomer = ReplyCache(directory)
    assert acquire_within(newcomer, ["x"]) == {"x"}  # the owner leases in rows from now on
    assert not leases.alone and not leases.unstored("j")  # the newcomer may store it
    newcomer.close()
    path.cache.close()


@pytest.mark.parametrize("written", ["before", "without-a-lease"])
def test_a_cache_with_an_entry_is_always_looked_up(tmp_path: Path, written: str) -> None:
    cache = ReplyCache(tmp_path / "cache")
    if written == "before":  # a cache a run filled earlier: it holds an entry when opened
        cache.put("earlier", b"entry")
    path = opened(CachePath[bytes](cache))
    assert leases_of(path).alone
    if written == "without-a-lease":  # stored by this process, not through a lease
        cache.put("k", b"entry")
    assert not leases_of(path).unstored("k") and not leases_of(path).unstored("j")
    cache.close()


def test_alone_in_a_new_cache_a_repeated_key_is_read_not_sent_again(tmp_path: Path) -> None:
    path = CachePath[bytes](ReplyCache(tmp_path / "cache"))
    sent: list[str] = []

    async def fetch(key: str) -> bytes:
        async def send() -> bytes:
            sent.append(key)
            return b"reply " + key.encode()

        return await path.fetch(key, same, same, send, same)

    async def main() -> list[bytes]:
        return [await fetch(key) for key in ("a", "b", "a", "b")]

    assert anyio.run(main) == [b"reply a", b"reply b", b"reply a", b"reply b"]
    assert sent == ["a", "b"] and path.stats.misses == 2 and path.stats.writes == 2
    assert leases_of(path).alone
    path.cache.close()
