"""The ``ragbatch`` command line: typer options -> ``RunOptions`` -> ``run.job.run`` (no logic).

``app`` holds ``run``, ``estimate`` and ``schema``; ``parse`` prints what a run would judge;
``tools`` the commands that work on finished reports (diff, calibrate, agreement, merge,
cache); ``labels`` the ones around human labels (audit-sample, infer, gate); ``export``
writes a report's verdicts for Phoenix or Langfuse; ``usage`` turns option errors into one ``error:`` line.
``run``'s options live in ``ragbatch.run._options`` (shared with the Python API). May import
every layer. ``ragbatch run`` builds only ``run_app`` (the same ``run`` command, without the
other commands' imports, which every run's start-up would pay).
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from collections.abc import Callable

from ragbatch._gc import collect_less


def main() -> None:
    """The command line: ``ragbatch run ...`` loads only the run command, anything else the
    whole command line (help included). Ends in SystemExit, as a typer app does."""
    if sys.argv[1:2] == ["run"]:
        from ragbatch.cli._run_app import app
    else:
        from ragbatch.cli._app import app
    sys.exit(app())


def entry() -> None:
    """The ``ragbatch`` program (the console script, ``python -m ragbatch``): :func:`main`,
    then the process ends without tearing the interpreter down.

    When ``main`` is done, its outputs are committed and closed, its caches closed, its workers
    and clusters stopped. What Python's own exit does that anyone could see is done here too,
    in its order: non-daemon threads joined (threading's shutdown, which also stops idle
    thread pools), atexit callbacks run (logging, multiprocessing, ``weakref.finalize``), the
    standard streams flushed, the same exit status. Only the teardown of every module and
    object is skipped: work nobody sees, and a sizeable share of a short run's CPU. The whole
    process collects cyclic garbage less often
    (:func:`ragbatch._gc.collect_less`: its imports too, not only its run). In-process callers
    (tests, notebooks) use :func:`main`.
    """
    try:
        with collect_less():  # the process's: its imports too (ragbatch._gc)
            main()
        code: object = None
    except SystemExit as exc:
        code = exc.code
    shutdown: Callable[[], None] | None = getattr(threading, "_shutdown", None)
    run_exitfuncs: Callable[[], None] | None = getattr(atexit, "_run_exitfuncs", None)
    if shutdown is None or run_exitfuncs is None:  # another Python: exit the usual way
        raise SystemExit(code)
    if code is None or isinstance(code, int):
        status = int(code or 0)
    else:  # as Python does for SystemExit("message"), before its shutdown
        print(code, file=sys.stderr)
        status = 1
    shutdown()
    run_exitfuncs()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # e.g. a closed pipe: let Python say it, as it would
        raise SystemExit(status) from None  # (the message, if any, is already out)
    os._exit(status)


__all__ = ["entry", "main"]
