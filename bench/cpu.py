"""Total CPU seconds of a command and of every process it starts (Linux).

The calling process becomes a child subreaper (``prctl(PR_SET_CHILD_SUBREAPER)``): a process
the command leaves behind (multiprocessing's fork server, Dask's nannies) is reparented to it
instead of to init, so it can be waited for, and ``getrusage(RUSAGE_CHILDREN)`` then counts
every descendant - each one's CPU is added to its parent's children total when it is reaped.
"""

from __future__ import annotations

import ctypes
import os
import resource
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass

PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> None:
    """Adopt the orphans of every command run from here on."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER) failed")


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def reap_all() -> None:
    """Wait for every remaining descendant (adopted orphans included)."""
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


@dataclass(frozen=True)
class Measured:
    wall_s: float
    cpu_s: float
    stderr: str


def measure(command: Sequence[str], env: dict[str, str] | None = None) -> Measured:
    """Run ``command`` to its end; its wall time and the CPU of all its processes."""
    reap_all()
    before = children_cpu()
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    reap_all()
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({done.returncode}): {done.stderr}")
    return Measured(wall, children_cpu() - before, done.stderr)
