"""``ragbatch run --dask ADDRESS``: the run's parts as tasks on a Dask cluster (composition).

``ADDRESS`` is a scheduler (``tcp://HOST:8786``, ``tls://…``) or ``local:N`` for a
``LocalCluster`` of N single-threaded worker processes on this machine. The run is split in
four parts per worker (so a worker that finishes early takes another part), each a task of
:func:`ragbatch.run._dask.run_part`: same options and same bytes as a single-process run.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack

from ragbatch.core import ConfigError
from ragbatch.run._config import JobResult
from ragbatch.run._dask import local_cluster, require_distributed, run_checked_on_dask
from ragbatch.run._preflight import Checked, ignore

PARTS_PER_WORKER = 4


def run_on_cluster(
    checked: Checked, address: str, warn: Callable[[str], None] = ignore
) -> JobResult:
    """Connect to (or start) the cluster named by ``address`` and run the checked run's parts
    there (``warn`` hears what the run warns about)."""
    with ExitStack() as stack:
        if address.startswith("local:"):
            try:
                n = int(address.removeprefix("local:"))
            except ValueError:
                n = 0
            if n < 1:
                raise ConfigError(f"--dask local:N needs N >= 1 worker processes, got {address!r}")
            client = stack.enter_context(local_cluster(n))
        else:
            dd = require_distributed()
            try:
                client = stack.enter_context(dd.Client(address, timeout="10s"))
            except OSError as exc:
                raise ConfigError(f"--dask {address}: cannot reach the scheduler ({exc})") from None
        workers = max(1, len(client.scheduler_info()["workers"]))
        return run_checked_on_dask(checked, workers * PARTS_PER_WORKER, client, warn)
