"""Stopping a run from outside: SIGINT/SIGTERM, or a worker's parent process going away (I/O).

:meth:`RunCanceller.run` runs the evaluation next to a watcher; on a signal, or when the process
that started this worker is no longer its parent (``kill -9`` of ``ragbatch run --workers``, a
cancelled CI job), the watcher cancels the evaluation: nothing more is sent, calls in flight are
dropped, and the job's clean-up closes the provider and the cache as after a normal run. With the
cache on, every reply that arrived is already in it, so a rerun resumes and pays again only for
the calls that were in flight; :func:`interrupted_message` says which case a run is in.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
from collections.abc import Awaitable, Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import anyio
from anyio import CancelScope

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


@contextmanager
def signals_held(signals: Iterable[signal.Signals] = SIGNALS) -> Iterator[None]:
    """Hold ``signals`` back while the body runs; they are delivered when it ends. A process
    forked meanwhile starts with them held (until it has its own handling and lets them
    through), and no handler runs inside the interpreter's at-fork hooks, which would swallow
    what it raised."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, signals)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


@dataclass
class RunCanceller:
    """What stops a run early: ``signals`` and, for a worker, the loss of its parent
    ``parent_pid`` (checked every ``poll_s`` seconds).

    While :meth:`catching` (from the start of ``ragbatch run``; :meth:`run` catches too) a
    signal is only recorded in ``signum`` and wakes whoever waits on :attr:`wakeup_fd`: the
    handler raises nothing, so it is safe wherever the main thread is when it lands (a fork,
    a finalizer), and each stage checks :attr:`stopped` before it starts something. A signal
    after the last check (the run's files being committed) lets the run finish."""

    signals: tuple[signal.Signals, ...] = SIGNALS
    parent_pid: int | None = None
    poll_s: float = 0.2
    signum: int | None = field(default=None, init=False)
    orphaned: bool = field(default=False, init=False)
    _wakeup: tuple[int, int] | None = field(default=None, init=False, repr=False)

    @property
    def stopped(self) -> bool:
        """Whether a signal came or the parent went away."""
        return self.signum is not None or self.orphaned

    @property
    def wakeup_fd(self) -> int | None:
        """A file descriptor that turns readable when a signal is recorded (while catching)."""
        return self._wakeup[0] if self._wakeup is not None else None

    @contextmanager
    def catching(self) -> Iterator[None]:
        """Record the signals while the body runs (a no-op when already catching), then put
        the previous handlers back."""
        if self._wakeup is not None or not self.signals:
            yield
            return
        read, write = os.pipe()
        os.set_blocking(write, False)
        self._wakeup = (read, write)
        previous = {s: signal.signal(s, self._record) for s in self.signals}
        try:
            yield
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
            self._wakeup = None
            os.close(read)
            os.close(write)

    def _record(self, signum: int, frame: object) -> None:
        if self.signum is None:
            self.signum = signum
        if self._wakeup is not None:
            with contextlib.suppress(OSError):  # full: the reader is woken already
                os.write(self._wakeup[1], b"\0")

    async def run(self, body: Callable[[], Awaitable[object]]) -> bool:
        """Run ``body`` to its end or until a stop comes; True when it was cut short (or never
        started: a signal came before)."""
        with self.catching():
            if self.stopped:
                return True
            finished = False
            async with anyio.create_task_group() as tg:
                if self._wakeup is not None:
                    tg.start_soon(self._signalled, tg.cancel_scope, self._wakeup[0])
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

    async def _signalled(self, scope: CancelScope, fd: int) -> None:
        await anyio.wait_readable(fd)  # a recorded signal wrote here (before this task, too)
        scope.cancel()

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
