"""Composition and execution: options -> parts -> execute -> outputs.

Read ``job`` first: the composition root, one page. ``options`` holds every setting once, in
small groups; ``preflight`` checks a run once, ``factory`` builds the parts from what it
checked; ``dispatch`` sends the run to one process, the workers or a cluster; ``execute`` runs
them (the ``runner``'s task group streams the rows, the progress display and
a ``stop.RunCanceller`` watch beside it); ``outputs`` writes the files, together and only on
success; ``calls`` keeps the run record's call facts; ``items`` opens the dataset the input
options name, as rows and traces. Also here: the cost limit of
``--max-cost`` (``budget``; the error budget of ``--max-error-rate`` is the runner's),
``progress``, ``estimate``, shards and partials (``shards``), a file split into parts each
worker reads alone (``split``) and their merged summaries (``summary``), the parts of a split
run and their merge (``parts``), ``workers`` on one machine, the Dask adapter (``dask``) and
``--dask`` (``cluster``).

Does I/O. May import every layer below it: ``calibrate``, ``compare``, ``report``,
``metrics``, ``data``, ``providers``, ``core``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ragbatch._lazy import lazy_exports
from ragbatch.run._budget import HOURLY_KIND

# The front door: what other packages use (the modules behind it are private).
from ragbatch.run._config import DEFAULT_CACHE, DEFAULT_DATASET, DEFAULT_PRICING, PRICING_NAME
from ragbatch.run._dispatch import run
from ragbatch.run._execute import first_error
from ragbatch.run._factory import estimate_options
from ragbatch.run._items import ItemCounts, open_source_items, open_source_rows
from ragbatch.run._job import run_job, run_options_async
from ragbatch.run._judge import Judge, open_judge
from ragbatch.run._options import (
    ENVIRONMENT,
    GROUPS,
    OPTION_NAMES,
    PATH_OPTIONS,
    InputOptions,
    RunOptions,
    cli_fields,
    spec_of,
)
from ragbatch.run._stop import RunCanceller

if TYPE_CHECKING:
    from ragbatch.run._dask import local_cluster, run_on_dask
    from ragbatch.run._probe_report import probe_report
    from ragbatch.run._shards import merge_partials

__all__ = [
    "DEFAULT_CACHE",
    "DEFAULT_DATASET",
    "DEFAULT_PRICING",
    "ENVIRONMENT",
    "GROUPS",
    "HOURLY_KIND",
    "OPTION_NAMES",
    "PATH_OPTIONS",
    "PRICING_NAME",
    "InputOptions",
    "ItemCounts",
    "Judge",
    "RunCanceller",
    "RunOptions",
    "cli_fields",
    "estimate_options",
    "first_error",
    "local_cluster",
    "merge_partials",
    "open_judge",
    "open_source_items",
    "open_source_rows",
    "probe_report",
    "run",
    "run_job",
    "run_on_dask",
    "run_options_async",
    "spec_of",
]

# The Dask adapter (and the worker split it uses) and the partials' merge are imported only
# when asked for: a run without --workers, --dask or --merge never loads them (start-up).
__getattr__ = lazy_exports(
    __name__,
    {
        "_dask": ("local_cluster", "run_on_dask"),
        "_shards": ("merge_partials",),
        "_probe_report": ("probe_report",),
    },
)
