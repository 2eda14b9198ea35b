"""Parts of a run as tasks on a Dask cluster: submit, gather, merge (cluster I/O; no evaluation).

The optional ``dask`` extra (``pip install 'ragbatch[dask]'``) brings ``distributed``; it is
imported only when a function here is called, so the base install stays light.

:func:`run_on_dask` splits a JSONL file into ``parts`` consecutive ranges of rows
(:mod:`ragbatch.run._split`) and runs each as one task (``pure=False``: a rerun evaluates
again). No filesystem is shared: a task receives its rows' raw bytes and the options, works in
a private directory under its worker's own local directory (removed when it ends) and returns
through Dask its summary (:mod:`ragbatch.run._summary`), its ``--rows-out`` lines and the new
cache entries. The client merges the summaries in order (the report equals a single-process
one), writes the rows file, and stores the entries in its own ``--cache-dir``; so a later
run - single-process, ``--offline``, or on the cluster again - finds them there. To resume
without a shared disk, the client sends the entries its cache already holds to the cluster
once (one scattered object, as large as that cache) and each task starts from them.

The run is checked once, here (:func:`~ragbatch.run._preflight.preflight`); each task gets its
part of the checked run (:func:`ragbatch.run._parts.part_of`: 1/N of the concurrency and of
every budget, so the cluster as a whole keeps the single-process limits; the pricing snapshot
and the policy as read here, so no worker needs those files). The options travel to the
scheduler and the workers pickled, API key included: on anything but a loopback cluster, use
Dask's TLS security settings. A task whose worker dies is retried by Dask on
another worker.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragbatch._files import atomic_file
from ragbatch.core import ConfigError, install_extra
from ragbatch.providers.cache import read_entries, store_entries
from ragbatch.report import RowsWriter
from ragbatch.run._config import JobResult
from ragbatch.run._options import RunOptions
from ragbatch.run._parts import (
    finish_parts,
    part_of,
    part_table_limit,
    raise_shard_error,
    run_shard_task,
)
from ragbatch.run._preflight import Checked, ignore, preflight, rows_warning
from ragbatch.run._probe_report import check_probed_rows
from ragbatch.run._split import PlannedRows, detached, part_source, plan_rows

if TYPE_CHECKING:
    import distributed

MISSING = f"the Dask adapter needs the 'dask' extra: {install_extra('dask')}"
Entries = list[tuple[str, bytes]]


def require_distributed() -> Any:
    try:
        import distributed
    except ImportError:
        raise ConfigError(MISSING) from None
    return distributed


# A local cluster has no dashboard, so nothing reads what these would collect: the workers'
# statistical profiler (a thread sampling the task's stack every 10 ms), the system monitor
# (psutil every 0.5 s) and the 20 ms ticks that time the event loop. Each costs CPU in every
# worker process while it runs a task or idles (bench/bench_cores.py).
QUIET_LOCAL = {
    "distributed.worker.profile.enabled": False,
    "distributed.admin.system-monitor.interval": "5s",
    "distributed.admin.tick.interval": "1s",
}


@contextmanager
def local_cluster(n_workers: int) -> Iterator[distributed.Client]:
    """A ``LocalCluster`` of ``n_workers`` single-threaded processes on loopback, no dashboard
    (and none of the monitoring that only feeds one: :data:`QUIET_LOCAL`)."""
    dd = require_distributed()
    import dask

    with (
        dask.config.set(QUIET_LOCAL),  # read by the scheduler and passed to every worker
        dd.LocalCluster(
            n_workers=n_workers,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
            # the scheduler's HTTP routes (health, metrics) listen even with no dashboard, on
            # port 8787 unless told: a free port instead, on loopback
            scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
        ) as cluster,
        dd.Client(cluster) as client,
    ):
        yield client


def run_part(part: Checked, seed: Entries | None) -> dict[str, Any]:
    """One part, on a Dask worker: evaluate in a private directory of the worker's, return
    everything the client needs as data (nothing is left on the worker's disk)."""
    try:
        from distributed import get_worker

        scratch: str | None = get_worker().local_directory
    except (ImportError, ValueError):  # run outside a worker (tests, a local fallback)
        scratch = None
    work = Path(tempfile.mkdtemp(prefix="ragbatch-part-", dir=scratch))
    try:
        cache = work / "cache"
        known = set()
        if seed:
            known = {key for key, _ in seed}
            store_entries(cache, seed)
        rows = work / "rows.jsonl" if part.options.output.rows_out is not None else None
        task = part.replace(cache_dir=cache, partial_out=work / "part.pkl", rows_out=rows)
        done = run_shard_task(task)
        if "error" in done:
            return done
        new = [(k, v) for k, v in read_entries(cache) if k not in known]
        done["summary"] = (work / "part.pkl").read_bytes()
        done["rowsOut"] = rows.read_bytes() if rows is not None else None
        done["entries"] = new
        return done
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _task(checked: Checked, source: PlannedRows, k: int, parts: int, table: int | None) -> Checked:
    return part_of(checked, k, parts, Path("part.pkl")).replace(
        source=source,
        max_report_rows=table,
        rows_out=checked.options.output.rows_out,  # a marker: the task writes its rows there
        quiet=True,
    )


def run_on_dask(
    config: RunOptions,
    parts: int,
    client: distributed.Client,
    warn: Callable[[str], None] = ignore,
) -> JobResult:
    """Check the run ``config`` describes (``warn`` hears its warnings), run it as ``parts``
    tasks on ``client``'s cluster and merge them into one report (and ``--rows-out``); the
    tasks' new cache entries go into the options' ``cache_dir``."""
    require_distributed()  # before anything is read: the extra is what is missing
    return run_checked_on_dask(preflight(config, warn), parts, client, warn)


def run_checked_on_dask(
    checked: Checked,
    parts: int,
    client: distributed.Client,
    warn: Callable[[str], None] = ignore,
) -> JobResult:
    """:func:`run_on_dask` of a run :func:`~ragbatch.run._preflight.preflight` checked."""
    dd = require_distributed()
    if parts < 1:
        raise ConfigError(f"parts must be at least 1, got {parts}")
    config = checked.options
    i, cache_dir = config.input, config.cache.cache_dir
    if i.source is not None or i.format != "jsonl":
        raise ConfigError("the Dask adapter reads a JSONL dataset file (--format jsonl)")
    started = time.perf_counter()
    plan = plan_rows(i.dataset)
    if plan is None or plan.rows == 0:
        raise ConfigError(f"cannot split {i.dataset}: run it without --dask to see why")
    if (warning := rows_warning(config, plan.rows)) is not None:
        warn(warning)  # the tasks' own warnings go unheard
    check_probed_rows(config, plan.rows)  # before anything is sent (--probe)
    parts = min(parts, plan.rows)
    ignore_unknown, html = i.ignore_unknown_fields, config.output.html is not None
    sources = [
        detached(part_source(plan, k, parts, ignore_unknown=ignore_unknown, keep_texts=html))
        for k in range(1, parts + 1)
    ]
    table = part_table_limit(config, plan)
    seed = read_entries(cache_dir) if config.jev.provider != "mock" else []
    # one object on every worker (a list given to scatter would become one future an item)
    seeded = client.scatter([seed], broadcast=True)[0] if seed else None  # type: ignore[no-untyped-call]
    tasks = [_task(checked, s, k, parts, table) for k, s in enumerate(sources, start=1)]
    # the rows travel as data, not inside the task graph (the scheduler keeps graphs small)
    scattered = client.scatter(tasks)  # type: ignore[no-untyped-call]
    futures = [client.submit(run_part, c, seeded, pure=False) for c in scattered]
    try:
        results: list[dict[str, Any]] = client.gather(futures)  # type: ignore[no-untyped-call]
    finally:
        dd.wait(futures)
    gathered = time.perf_counter()  # the client's serial part starts: merge and write
    raise_shard_error(results)
    # the tasks' new cache entries, into the client's cache (one transaction)
    store_entries(cache_dir, [entry for r in results for entry in r.pop("entries", [])])
    facts: dict[str, Any] = {"shards": parts, "engine": "dask", "mergeStarted": gathered}
    summaries = [r.pop("summary") for r in results]
    lines = [r.pop("rowsOut") for r in results]
    if config.output.rows_out is not None:
        with atomic_file(config.output.rows_out, RowsWriter.SUFFIX) as out:
            for chunk in lines:
                out.write(chunk or b"")
    merged = config.replace(rows_out=None)
    return finish_parts(merged, plan, summaries, results, started, facts, checked=checked)
