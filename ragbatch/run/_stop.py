"""Stopping a run from outside: SIGINT/SIGTERM, or a worker's parent process going away (I/O).

:meth:`RunCanceller.run` runs the evaluation next to a watcher; on a signal, or when the process
that started this worker is no longer its parent (``kill -9`` of ``ragbatch run --workers``, a
cancelled CI job), the watcher cancels the evaluation: nothing more is sent, calls in flight are
dropped, and the job's clean-up closes the provider and the cache as after a normal run. With the
cache on, every reply that arrived is already in it, so a rerun resumes and pays again only for
the calls that were in flight; :func:`interrupted_message` says which case a run is in.
"""

from __future__ import annotations

import os
import select
import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import anyio
from anyio import CancelScope
from anyio.abc import TaskStatus

from ragbatch.core import Interrupted

SIGNALS = (signal.SIGINT, signal.SIGTERM)


def interrupted_message(cause: str, cache: str | None) -> str:
    """What an interrupted run tells the user after ``cause`` (ending in its punctuation):
    ``cache`` is the directory finished replies were written to (None: nothing was cached,
    e.g. --no-cache or the mock provider)."""
    if cache is None:
        return (
            f"{cause} no report written; nothing was cached (no reply cache in this run), so "
            "a rerun starts from the first row"
        )
    return (
        f"{cause} no report written; every finished reply is in the cache ({cache}), rerun "
        "the same command to resume"
    )


@dataclass
class RunCanceller:
    """What stops a run early: ``signals`` (handled only while the run is on) and, for a worker,
    the loss of its parent ``parent_pid`` (checked every ``poll_s`` seconds)."""

    signals: tuple[signal.Signals, ...] = SIGNALS
    parent_pid: int | None = None
    poll_s: float = 0.2
    signum: int | None = field(default=None, init=False)
    orphaned: bool = field(default=False, init=False)

    async def run(self, body: Callable[[], Awaitable[object]]) -> bool:
        """Run ``body`` to its end or until a stop comes; True when it was cut short."""
        finished = False
        async with anyio.create_task_group() as tg:
            if self.signals:
                await tg.start(self._signals, tg.cancel_scope)
            if self.parent_pid is not None:
                tg.start_soon(self._parent, tg.cancel_scope, self.parent_pid)
            await body()
            finished = True
            tg.cancel_scope.cancel()
        return not finished

    def interrupted(self, rows_done: int, cache: str | None) -> Interrupted:
        """The error that ends a run cut short after ``rows_done`` rows; ``cache``: the cache
        directory replies were written to, if any."""
        signum: int = signal.SIGTERM if self.orphaned else (self.signum or signal.SIGINT)
        cause = (
            "its parent process went away"
            if self.orphaned
            else f"interrupted by {signal.Signals(signum).name}"
        )
        return Interrupted(interrupted_message(f"{cause} after {rows_done} rows:", cache), signum)

    async def _signals(
        self, scope: CancelScope, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        with anyio.open_signal_receiver(*self.signals) as received:
            task_status.started()
            async for signum in received:
                self.signum = int(signum)
                scope.cancel()
                return

    async def _parent(self, scope: CancelScope, parent_pid: int) -> None:
        alive = parent_watch(parent_pid)
        while alive():
            await anyio.sleep(self.poll_s)
        self.orphaned = True
        scope.cancel()


def parent_watch(parent_pid: int) -> Callable[[], bool]:
    """A check that process ``parent_pid`` still runs. A worker forked by multiprocessing's
    fork server is not the run's child, so its own parent says nothing: a pidfd of the run's
    process (Linux) turns readable when that process exits, whoever its children are. Without
    pidfds, a direct child is reparented (to init or a subreaper) when its parent goes."""
    try:
        fd = os.pidfd_open(parent_pid)
    except ProcessLookupError:
        return lambda: False
    except (AttributeError, OSError):
        return lambda: os.getppid() == parent_pid
    return lambda: not select.select([fd], [], [], 0)[0]
