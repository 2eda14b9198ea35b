"""The ``ragbatch`` command line: typer options -> ``RunOptions`` -> ``run.job.run`` (no logic).

``app`` holds ``run``, ``estimate`` and ``schema``; ``tools`` the commands that work on
finished reports (diff, calibrate, agreement, merge, cache); ``labels`` the ones around human
labels (audit-sample, infer, gate); ``export`` writes a report's
verdicts for Phoenix or Langfuse; ``usage`` turns option errors into one ``error:`` line.
``run``'s options live in ``ragbatch.run._options`` (shared with the Python API). May import
every layer. ``ragbatch run`` builds only ``run_app`` (the same ``run`` command, without the
other commands' imports: see the README's start-up figures).
"""

from __future__ import annotations

import sys


def main() -> None:
    """Console entry point: ``ragbatch run ...`` loads only the run command, anything else the
    whole command line (help included)."""
    if sys.argv[1:2] == ["run"]:
        from ragbatch.cli._run_app import app
    else:
        from ragbatch.cli._app import app
    sys.exit(app())


__all__ = ["main"]
