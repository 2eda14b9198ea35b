"""Several processes on one machine: shard, run, merge (process I/O; no evaluation logic).

``--workers W`` starts W processes (spawned, so each has its own interpreter and core), each
evaluating shard k/W with 1/W of the concurrency and of the rate budgets, all sharing the
cache directory (diskcache is safe across processes). The partial results are merged with
the same code as ``ragbatch merge``, so the report equals a single-process report.
"""

from __future__ import annotations

import math
import multiprocessing
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path

from ragbatch.job import JobConfig, JobResult, run_job, write_bytes
from ragbatch.partial import merge_partials
from ragbatch.report import report_bytes
from ragbatch.summarize import summarize


def shard_config(config: JobConfig, k: int, workers: int, partial: Path) -> JobConfig:
    """The options of worker k: its shard and its share of every budget."""
    return replace(
        config,
        shard=(k, workers),
        partial_out=partial,
        out=None,
        run_record=None,
        concurrency=max(1, math.ceil(config.concurrency / workers)),
        max_rps=config.max_rps / workers if config.max_rps else None,
        max_tokens_per_s=config.max_tokens_per_s / workers if config.max_tokens_per_s else None,
    )


def _run_shard(config: JobConfig) -> int:
    return run_job(config).report.dataset.rows


def run_workers(config: JobConfig, workers: int) -> JobResult:
    """Run ``workers`` shard processes and merge their partials into one report."""
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ragbatch-workers-") as tmp:
        partials = [Path(tmp) / f"part-{k}-of-{workers}.jsonl" for k in range(1, workers + 1)]
        configs = [shard_config(config, k, workers, p) for k, p in enumerate(partials, start=1)]
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
            list(pool.map(_run_shard, configs))
        info, outcomes = merge_partials(partials)
    report = summarize(outcomes, info)
    data = report_bytes(report)
    if config.out is not None:
        write_bytes(config.out, data)
    wall = time.perf_counter() - started
    rate = len(outcomes) / wall if wall > 0 else 0.0
    record = {"rows": len(outcomes), "wallSeconds": wall, "rowsPerSecond": rate, "workers": workers}
    return JobResult(report, data, wall, rate, record)
