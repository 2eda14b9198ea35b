"""Group commit for reply-cache writes (async; the commits run in one worker thread).

A write per row cost more CPU than the rest of the row at high concurrency: one thread hop,
one SQLite transaction and commit each, and up to 40 writer threads (each with its own SQLite
connection) contending for the write lock and invalidating each other's page caches.
:class:`GroupWriter` commits every entry that arrived while the previous commit ran in one
transaction, in one thread at a time.

Nothing is acknowledged before it is committed: :meth:`GroupWriter.put` returns once its
entry is on disk, so a caller that waits for it before taking new work (the runner's workers
do) never has more replies paid for and not yet cached than there are workers: a ``kill -9``
still loses at most the calls in flight.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import anyio

Entry = tuple[str, bytes]


class _Batch:
    __slots__ = ("done", "entries", "error")

    def __init__(self) -> None:
        self.entries: list[Entry] = []
        self.done = anyio.Event()
        self.error: BaseException | None = None


class GroupWriter:
    """Batches ``put`` calls that arrive while a commit runs into the next commit."""

    def __init__(self, commit: Callable[[Sequence[Entry]], None]) -> None:
        self._commit = commit
        self._batch = _Batch()
        self._committing = False
        self._idle = anyio.Event()  # set (and replaced) whenever a commit ends
        self._thread = anyio.CapacityLimiter(1)
        self.commits = 0

    async def put(self, key: str, value: bytes) -> None:
        """Store one entry; returns once it is committed (raises what the commit raised)."""
        batch = self._batch
        batch.entries.append((key, value))
        while not batch.done.is_set():
            if self._committing:
                await self._idle.wait()
            else:  # nobody commits: our entry is in the open batch, commit it
                await self._commit_open_batch()
        if batch.error is not None:
            raise batch.error

    async def _commit_open_batch(self) -> None:
        batch, self._batch = self._batch, _Batch()
        self._committing = True
        try:
            await anyio.to_thread.run_sync(self._commit, batch.entries, limiter=self._thread)
            self.commits += 1
        except Exception as exc:
            batch.error = exc
        finally:
            batch.done.set()
            self._committing = False
            idle, self._idle = self._idle, anyio.Event()
            idle.set()
