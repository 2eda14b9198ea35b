"""The ``ragbatch`` command line: typer options -> ``RunOptions`` -> ``run.job.run`` (no logic).

``app`` holds ``run``, ``estimate`` and ``schema``; ``tools`` the commands that work on
finished reports (diff, calibrate, agreement, merge, cache); ``labels`` the ones around human
labels (audit-sample, infer, gate); ``export`` writes a report's
verdicts for Phoenix or Langfuse; ``usage`` turns option errors into one ``error:`` line.
``run``'s options live in ``ragbatch.run._options`` (shared with the Python API). May import
every layer.
"""

from ragbatch.cli._app import main

__all__ = ["main"]
