"""Group commit of cache writes: fewer commits than writes, nothing acknowledged early."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest

from ragbatch.providers.cache import _writer
from ragbatch.providers.cache._replies import ReplyCache
from ragbatch.providers.cache._writer import GATHER_TURNS, GroupCommit


def test_concurrent_puts_share_commits_and_return_once_committed(tmp_path: Path) -> None:
    cache = ReplyCache(tmp_path / "cache")
    batches: list[int] = []
    gate = threading.Event()

    def commit(entries: Sequence[tuple[str, bytes]]) -> None:
        gate.wait(5)  # the first commit is slow: the other writes pile up behind it
        cache.put_many(entries)
        batches.append(len(entries))

    writer = GroupCommit(commit)
    returned: list[str] = []

    async def put(i: int) -> None:
        await writer.submit((f"k{i}", b"v%d" % i))
        assert cache.get(f"k{i}") == b"v%d" % i  # on disk before put returns
        returned.append(f"k{i}")

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            for i in range(50):
                tg.start_soon(put, i)
            await anyio.sleep(0.05)
            assert returned == []  # nothing acknowledged while the first commit runs
            gate.set()

    anyio.run(main)
    assert sorted(returned) == sorted(f"k{i}" for i in range(50))
    assert sum(batches) == 50
    assert len(batches) <= 3 < 50  # the first write alone, then everything that waited
    assert writer.commits == len(batches)
    cache.close()


def test_a_failed_commit_raises_in_every_put_of_its_batch() -> None:
    def commit(entries: Sequence[tuple[str, bytes]]) -> None:
        raise OSError("disk full")

    writer = GroupCommit(commit)
    errors: list[str] = []

    async def put(i: int) -> None:
        with pytest.raises(OSError, match="disk full"):
            await writer.submit((f"k{i}", b"v"))
        errors.append(f"k{i}")

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            for i in range(5):
                tg.start_soon(put, i)

    anyio.run(main)
    assert len(errors) == 5


@pytest.mark.parametrize("gather_s", [60.0, 0.0])
def test_an_inline_commit_gathers_a_burst_over_a_few_turns_of_the_loop(
    gather_s: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Items that arrive one turn of the event loop after another join the open batch while
    it keeps growing (up to ``GATHER_TURNS`` turns, within ``GATHER_S``); then the commit runs
    without waiting for the stragglers, which make the next batch. A lone item waits a single
    turn, and so does any batch once ``GATHER_S`` has passed."""
    monkeypatch.setattr(_writer, "GATHER_S", gather_s)
    batches: list[list[int]] = []

    def commit(items: Sequence[int]) -> None:
        batches.append(list(items))

    writer = GroupCommit(commit, commit)

    async def submit_after(turns: int) -> None:
        for _ in range(turns):
            await anyio.lowlevel.checkpoint()
        await writer.submit(turns)

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            for turns in arrivals:
                tg.start_soon(submit_after, turns)
        await writer.submit(-1)  # alone

    # the committer and one more in the first turn, then one more each turn
    arrivals = [0, 0, *range(1, GATHER_TURNS + 3)]
    anyio.run(main)
    # it grew every turn: what came in the first GATHER_TURNS turns is one commit (with no
    # time to gather, what came in the first turn)
    turns = GATHER_TURNS if gather_s else 1
    assert batches[0] == [t for t in arrivals if t < turns]
    assert gather_s == 0 or len(batches[0]) > arrivals.count(0)  # more than the first turn's
    assert sorted(x for batch in batches[1:-1] for x in batch) == [
        t for t in arrivals if t >= turns
    ]
    assert batches[-1] == [-1]
    assert writer.commits == len(batches)
