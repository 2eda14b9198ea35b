"""The ``ragbatch`` command line: typer options -> ``RunOptions`` -> ``run.job.run`` (no logic).

``app`` holds ``run``, ``estimate`` and ``schema``; ``tools`` the commands that work on
finished reports (gate, diff, calibrate, audit, merge, cache); ``export`` writes a report's
verdicts for Phoenix or Langfuse; ``usage`` turns option errors into one ``error:`` line.
``run``'s options live in ``ragbatch.run.options`` (shared with the Python API). May import
every layer.
"""

from ragbatch.cli.app import main

__all__ = ["main"]
