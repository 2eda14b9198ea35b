"""Shards as tasks on a Dask cluster: submit, gather, merge (cluster and file I/O; no evaluation).

The optional ``dask`` extra (``pip install 'ragbatch[dask]'``) brings ``distributed``; it is
imported only when a function here is called, so the base install stays light.

:func:`run_on_dask` runs shard k of N as one task (``pure=False``: a rerun evaluates again).
Each task gets 1/N of the concurrency and of the rate budgets (:func:`ragbatch.run._workers.
shard_config`), so the cluster as a whole keeps the budget of the single-process options.
Each task uses its own cache directory ``cache_root/worker-k`` - keyed by the shard, not by
the Dask worker that happens to run it, so a rerun with the same shard count finds its
entries whichever worker picks the task up. ``ragbatch.providers.cache._merge.merge_caches`` folds them
into one cache afterwards. Partials are exchanged through a temporary directory, so the
workers must share the client's filesystem (a ``LocalCluster``, or a shared mount); the merge
is :func:`ragbatch.run._shards.merge_partials`, so the report equals a single-process report.

The task's options travel to the scheduler and the workers pickled, API key included: on
anything but a loopback cluster, use Dask's TLS security settings. A task whose worker dies
is retried by Dask on another worker; its shard resumes from its own cache directory.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragbatch.core import ConfigError
from ragbatch.run._config import JobResult
from ragbatch.run._options import RunOptions
from ragbatch.run._workers import finish, run_shard_task, shard_config

if TYPE_CHECKING:
    import distributed

MISSING = "the Dask adapter needs the 'dask' extra: pip install 'ragbatch[dask]'"


def _require_distributed() -> Any:
    try:
        import distributed
    except ImportError:
        raise ConfigError(MISSING) from None
    return distributed


@contextmanager
def local_cluster(n_workers: int) -> Iterator[distributed.Client]:
    """A ``LocalCluster`` of ``n_workers`` single-threaded processes on loopback, no dashboard."""
    dd = _require_distributed()
    with (
        dd.LocalCluster(
            n_workers=n_workers,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
        ) as cluster,
        dd.Client(cluster) as client,
    ):
        yield client


def _task_config(config: RunOptions, k: int, shards: int, partial: Path, cache: Path) -> RunOptions:
    # Absolute paths: a worker's working directory is not the client's concern.
    shard = shard_config(config, k, shards, partial)
    return shard.replace(
        dataset=config.input.dataset.resolve(),
        pricing=config.policy.pricing.resolve(),
        cache_dir=cache.resolve(),
        quiet=True,
    )


def run_on_dask(
    config: RunOptions, shards: int, client: distributed.Client, cache_root: Path
) -> JobResult:
    """Run ``shards`` shard tasks on ``client``'s cluster and merge them into one report."""
    dd = _require_distributed()
    if shards < 1:
        raise ConfigError(f"shards must be at least 1, got {shards}")
    if config.input.source is not None:
        raise ConfigError("the Dask adapter reads a dataset file; in-memory row sources stay local")
    if config.output.rows_out is not None:
        raise ConfigError("--rows-out is not supported with the Dask adapter")
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ragbatch-dask-") as tmp:
        partials = [Path(tmp) / f"part-{k}-of-{shards}.jsonl" for k in range(1, shards + 1)]
        configs = [
            _task_config(config, k, shards, part, cache_root / f"worker-{k}")
            for k, part in enumerate(partials, start=1)
        ]
        futures = [client.submit(run_shard_task, c, pure=False) for c in configs]
        # Every task finished (or failed) before the temporary directory goes away.
        dd.wait(futures)
        results: list[dict[str, Any]] = [future.result() for future in futures]
        return finish(config, partials, results, started, {"shards": shards, "engine": "dask"})
