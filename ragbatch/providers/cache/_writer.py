"""Group commit for the reply cache's writes and leases (async; commits run in one thread).

A write per row cost more CPU than the rest of the row at high concurrency: one thread hop,
one SQLite transaction and commit each, and up to 40 writer threads (each with its own SQLite
connection) contending for the write lock and invalidating each other's page caches. The
per-key leases (:mod:`ragbatch.providers.cache._lease`) add two more transactions a row.
:class:`GroupCommit` runs every item that arrived while the previous commit ran in one
commit, in one thread at a time: the reply cache gives it the entries to store, the leases
to let go of and those to take, all in one thread hop (``ReplyCache.commit_ops``).

Nothing is acknowledged before it is committed: :meth:`GroupCommit.submit` returns once its
item's batch is on disk, so a caller that waits for it before taking new work (the runner's
workers do) never has more replies paid for and not yet cached than there are workers: a
``kill -9`` still loses at most the calls in flight.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Generic, TypeVar

import anyio

T = TypeVar("T")
R = TypeVar("R")
# The threads commits run in, for every group of the process (one commit per group at a time:
# the caches of Jev and of the fallback judge may commit side by side): a hop through a plain
# executor costs the event loop less than anyio's ``to_thread`` (README, performance).
_THREADS = ThreadPoolExecutor(2, thread_name_prefix="ragbatch-cache")


class _Batch(Generic[T, R]):
    __slots__ = ("done", "error", "items", "result")

    def __init__(self) -> None:
        self.items: list[T] = []
        self.done = anyio.Event()
        self.error: BaseException | None = None
        self.result: R | None = None


class GroupCommit(Generic[T, R]):
    """Batches ``submit`` calls that arrive while a commit runs into the next commit; each
    caller gets its batch's result (``commit(items)``'s return value)."""

    def __init__(self, commit: Callable[[Sequence[T]], R]) -> None:
        self._commit = commit
        self._batch: _Batch[T, R] = _Batch()
        self._committing = False
        self._idle = anyio.Event()  # set (and replaced) whenever a commit ends
        self.commits = 0

    @property
    def pending(self) -> int:
        """Items waiting for the next commit."""
        return len(self._batch.items)

    async def submit(self, item: T) -> R:
        """Commit ``item`` with whatever else is waiting; returns once it is committed (raises
        what the commit raised)."""
        batch = self._batch
        batch.items.append(item)
        while not batch.done.is_set():
            if self._committing:
                await self._idle.wait()
            else:  # nobody commits: our item is in the open batch, commit it
                await self._commit_open_batch()
        if batch.error is not None:
            raise batch.error
        return batch.result  # type: ignore[return-value]  # set when done without error

    async def _commit_open_batch(self) -> None:
        batch, self._batch = self._batch, _Batch()
        self._committing = True
        try:
            done = asyncio.get_running_loop().run_in_executor(_THREADS, self._commit, batch.items)
            # as anyio's to_thread: a cancelled caller still waits for the commit it started
            with anyio.CancelScope(shield=True):
                batch.result = await done
            self.commits += 1
        except Exception as exc:
            batch.error = exc
        finally:
            batch.done.set()
            self._committing = False
            idle, self._idle = self._idle, anyio.Event()
            idle.set()
