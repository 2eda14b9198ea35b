"""Group commit of cache writes: fewer commits than writes, nothing acknowledged early."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

import anyio
import pytest

from ragbatch.providers.cache._replies import ReplyCache
from ragbatch.providers.cache._writer import GroupCommit


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
