"""Group commit for the reply cache's writes and leases (async; a commit runs on the event
loop when it need not wait for a lock, else in a thread).

A write per row cost more CPU than the rest of the row at high concurrency: one thread hop,
one SQLite transaction and commit each, and up to 40 writer threads (each with its own SQLite
connection) contending for the write lock and invalidating each other's page caches. The
per-key leases (:mod:`ragbatch.providers.cache._lease`) add two more transactions a row.
:class:`GroupCommit` runs every item that arrived while the previous commit ran (or in the
next few turns of the event loop: ``GATHER_TURNS``, ``GATHER_S``) in one commit, one commit
at a time: the reply cache gives it the entries to store, the leases to let go of and those
to take (``ReplyCache.commit_ops``).

Nothing is acknowledged before it is committed: :meth:`GroupCommit.submit` returns once its
item's batch is on disk. The runner's workers go further without losing that bound: inside
:func:`deferred_writes` a task's stores are handed to the open batch (:meth:`GroupCommit.defer`)
and the task goes on with its row (the policy, the report) and its next one (the lookup, the
lease) while they wait for the next commit, which someone's lease commits anyway; the task
settles them (:meth:`Unsettled.settle`: waits for them, commits them if nobody does, raises
what failed) before it sends another request and before it ends. So a task never has more
than one reply paid for and not yet cached, and has none while it waits for another call: a
``kill -9`` still loses at most the calls in flight, one a worker. Deferring lets a reply ride
on a commit that would run anyway, so a live row needs fewer commits of its own (a commit amid
a run, its caches cold, costs several times the SQLite work it does).

A commit first runs **inline**, on the event loop, when its group has an ``inline`` commit: a
hop to a thread and back cost the loop more than the SQLite work itself (a lease, a store and
a release are cheap; the two wake-ups are several times their cost). The inline commit must never wait: it runs under :func:`no_wait`, so a
write lock held by another connection (another process sharing the cache, ``--workers``)
fails it at once with :class:`LockTaken`, and the same batch is then committed from the
thread, which may wait. :func:`no_wait` leaves the connection that way (setting and resetting
it was four statements a commit); whatever may wait on it calls :func:`may_wait` first. WAL
checkpoints (which fsync) are left to the thread too: inline commits do not checkpoint, and
every ``THREAD_EVERY``-th commit of a group runs in the thread, where SQLite checkpoints the
WAL once it has grown past 1,000 pages.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager, contextmanager
from contextvars import ContextVar
from typing import Generic, TypeVar

import anyio
import anyio.lowlevel

T = TypeVar("T")
R = TypeVar("R")
# The threads commits run in, for every group of the process (one commit per group at a time:
# the caches of Jev and of the fallback judge may commit side by side): a hop through a plain
# executor costs the event loop less than anyio's ``to_thread``.
_THREADS = ThreadPoolExecutor(2, thread_name_prefix="ragbatch-cache")
THREAD_EVERY = 32  # every so many commits of a group run in the thread (WAL checkpoints)
# Turns of the event loop an inline commit waits for more items, at most: one, then one more
# each time the last brought some, while under GATHER_S has passed. Replies come back in
# bursts (the rows sent together): one commit for a burst instead of several saves a
# live row's CPU. The time bound keeps rows from waiting on turns that are long because the
# loop is busy (a burst of 256 replies): unbounded, the turns cost rows/s at 256 in flight.
# A lone item waits one turn.
GATHER_TURNS = 4
GATHER_S = 0.001
_AUTOCHECKPOINT = 1000  # SQLite's default WAL pages before a commit checkpoints


class LockTaken(Exception):
    """An inline commit found the write lock taken (or its own connection busy in a thread):
    nothing was committed by it that the thread's commit of the same batch does not redo."""


# Connections left in the no-wait state by :func:`no_wait` (by id; the strong reference keeps
# an id from being reused while it is here).
_NO_WAIT: dict[int, sqlite3.Connection] = {}
_NO_WAIT_LOCK = threading.Lock()


@contextmanager
def no_wait(con: sqlite3.Connection) -> Iterator[None]:
    """Within: a write lock held by another connection fails at once, as :class:`LockTaken`
    (SQLite's "database is locked"), instead of waiting, and a commit does not checkpoint
    the WAL.

    The settings stay after it: an inline commit comes every row or two, and switching them
    off and back on was four statements a commit (~17 µs of CPU a row at ``--concurrency
    32``). Reads do not wait for locks in WAL mode, so lookups on the connection are
    unaffected; anything that may wait for a lock on it calls :func:`may_wait` first."""
    if id(con) not in _NO_WAIT:
        con.execute("PRAGMA busy_timeout = 0")
        con.execute("PRAGMA wal_autocheckpoint = 0")
        with _NO_WAIT_LOCK:
            _NO_WAIT[id(con)] = con
    try:
        yield
    except sqlite3.OperationalError as exc:
        if is_lock_error(exc):
            raise LockTaken(str(exc)) from None
        raise


def may_wait(con: sqlite3.Connection, timeout_s: float) -> bool:
    """Let ``con`` wait up to ``timeout_s`` for another connection's lock, and checkpoint the
    WAL, again, if :func:`no_wait` left it otherwise: whether it had."""
    if id(con) not in _NO_WAIT:
        return False
    with _NO_WAIT_LOCK:
        _NO_WAIT.pop(id(con), None)
    con.execute(f"PRAGMA busy_timeout = {int(timeout_s * 1000)}")
    con.execute(f"PRAGMA wal_autocheckpoint = {_AUTOCHECKPOINT}")
    return True


def forget(con: sqlite3.Connection | None) -> None:
    """Drop ``con`` from the no-wait connections (it is being closed)."""
    if con is not None:
        with _NO_WAIT_LOCK:
            _NO_WAIT.pop(id(con), None)


def is_lock_error(exc: BaseException) -> bool:
    """Whether SQLite refused for a lock another connection holds."""
    return isinstance(exc, sqlite3.OperationalError) and (
        "locked" in str(exc) or "busy" in str(exc)
    )


class Batch(Generic[T, R]):
    """Items committed together; ``then``: called once the commit is over (done or failed)."""

    __slots__ = ("done", "error", "items", "result", "then")

    def __init__(self) -> None:
        self.items: list[T] = []
        self.done = False
        self.error: BaseException | None = None
        self.result: R | None = None
        self.then: list[Callable[[], None]] = []


class GroupCommit(Generic[T, R]):
    """Batches ``submit`` calls that arrive while a commit runs into the next commit; each
    caller gets its batch's result (``commit(items)``'s return value).

    ``inline``: the same commit, run on the event loop, that raises :class:`LockTaken` instead
    of waiting for a lock (then ``commit`` runs the batch in a thread)."""

    def __init__(
        self,
        commit: Callable[[Sequence[T]], R],
        inline: Callable[[Sequence[T]], R] | None = None,
    ) -> None:
        self._commit = commit
        self._inline = inline
        self._batch: Batch[T, R] = Batch()
        self._committing = False
        # what items that arrive during a commit wait on (made by the first: set and
        # dropped when the commit ends)
        self._idle: anyio.Event | None = None
        self.commits = 0
        self.threaded = 0  # commits that ran in the thread
        self.gave_way = 0  # inline commits that found the lock taken

    @property
    def pending(self) -> int:
        """Items waiting for the next commit."""
        return len(self._batch.items)

    @property
    def committing(self) -> bool:
        """Whether a commit runs (or is about to: it waits for this turn of the loop)."""
        return self._committing

    async def submit(self, item: T) -> R:
        """Commit ``item`` with whatever else is waiting; returns once it is committed (raises
        what the commit raised)."""
        return await self.wait(self.defer(item))

    def defer(self, item: T) -> Batch[T, R]:
        """Put ``item`` in the open batch and return at once: the batch, to :meth:`wait` for.
        Nothing commits it until someone submits or waits."""
        batch = self._batch
        batch.items.append(item)
        return batch

    async def wait(self, batch: Batch[T, R]) -> R:
        """``batch``'s result once it is committed (committing it when nobody is committing:
        then it is the open one); raises what its commit raised."""
        while not batch.done:
            if self._committing:
                if self._idle is None:
                    self._idle = anyio.Event()
                await self._idle.wait()
            else:  # nobody commits: our item is in the open batch, commit it
                await self._commit_open_batch()
        if batch.error is not None:
            raise batch.error
        return batch.result  # type: ignore[return-value]  # set when done without error

    async def _commit_open_batch(self) -> None:
        self._committing = True
        if self._inline is not None:  # what else is ready in this turn of the loop joins in,
            seen, turns = len(self._batch.items), 1  # and in the next ones while it still grows
            clock = asyncio.get_running_loop().time
            until = clock() + GATHER_S
            await anyio.lowlevel.cancel_shielded_checkpoint()
            while len(self._batch.items) > seen and turns < GATHER_TURNS and clock() < until:
                seen, turns = len(self._batch.items), turns + 1
                await anyio.lowlevel.cancel_shielded_checkpoint()
        batch, self._batch = self._batch, Batch()
        try:
            batch.result = await self._run(batch.items)
            self.commits += 1
        except Exception as exc:
            batch.error = exc
        finally:
            batch.done = True
            self._committing = False
            for then in batch.then:
                then()
            idle, self._idle = self._idle, None
            if idle is not None:
                idle.set()

    async def _run(self, items: list[T]) -> R:
        """Commit inline when it can do so without waiting, else in the thread."""
        if self._inline is not None and (self.commits + 1) % THREAD_EVERY:
            try:
                return self._inline(items)
            except LockTaken:
                self.gave_way += 1
        self.threaded += 1
        done = asyncio.get_running_loop().run_in_executor(_THREADS, self._commit, items)
        # as anyio's to_thread: a cancelled caller still waits for the commit it started
        with anyio.CancelScope(shield=True):
            result = await done
        return result


class Unsettled:
    """A task's deferred cache writes (see :func:`deferred_writes`): for each, what waits
    for its commit and raises what failed (and lets go of what the write held)."""

    __slots__ = ("_writes",)

    def __init__(self) -> None:
        self._writes: list[Callable[[], Awaitable[None]]] = []

    def add(self, settle: Callable[[], Awaitable[None]]) -> None:
        self._writes.append(settle)

    async def settle(self) -> None:
        """Wait until every write handed over is committed (committing it if nobody does);
        raises the first that failed."""
        while self._writes:
            settle = self._writes.pop()
            try:
                await settle()
            except anyio.get_cancelled_exc_class():
                self._writes.append(settle)  # still to settle: the exit does, shielded
                raise


_UNSETTLED: ContextVar[Unsettled | None] = ContextVar("ragbatch_unsettled_writes", default=None)


def unsettled() -> Unsettled | None:
    """The deferred writes of the running task, when it runs in :func:`deferred_writes`."""
    return _UNSETTLED.get()


@asynccontextmanager
async def deferred_writes() -> AsyncIterator[None]:
    """Within (one task, e.g. a runner's worker): a reply the cache fetched is handed to the
    next group commit and the caller goes on; the cache settles the task's writes before it
    sends another request, and the exit settles the rest, even when cancelled. Outside, a
    fetch returns once its reply is committed."""
    writes = Unsettled()
    token = _UNSETTLED.set(writes)
    try:
        yield
    finally:
        _UNSETTLED.reset(token)
        with anyio.CancelScope(shield=True):
            await writes.settle()
