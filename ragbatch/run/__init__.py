"""Composition and execution: options -> parts -> execute -> outputs.

Read ``job`` first: the composition root, one page. ``options`` holds every setting once, in
small groups; ``factory`` builds the parts from them (after the checks of ``preflight``);
``execute`` runs them (the ``runner``'s task group streams the rows, the progress display and
a ``stop.RunCanceller`` watch beside it); ``outputs`` writes the files, together and only on
success; ``calls`` keeps the run record's call facts. Also here: the cost limit of
``--max-cost`` (``budget``; the error budget of ``--max-error-rate`` is the runner's),
``progress``, ``estimate``, shards and partials (``shards``), ``workers`` on one machine and
the Dask adapter (``dask``).

Does I/O. May import every layer below it: ``calibrate``, ``compare``, ``report``,
``metrics``, ``data``, ``providers``, ``core``.
"""
