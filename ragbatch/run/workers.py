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
from typing import Any

import orjson

from ragbatch.core.errors import RagbatchError
from ragbatch.report.builder import summarize
from ragbatch.report.models import report_bytes
from ragbatch.run.job import JobConfig, JobResult, run_job, write_bytes
from ragbatch.run.shards import merge_partials


def shard_config(config: JobConfig, k: int, workers: int, partial: Path) -> JobConfig:
    """The options of worker k: its shard and its share of every budget."""
    return replace(
        config,
        shard=(k, workers),
        partial_out=partial,
        out=None,
        run_record=None,
        max_report_rows=0,  # the shard's own report is not written: skip its rows
        concurrency=max(1, math.ceil(config.concurrency / workers)),
        max_rps=config.max_rps / workers if config.max_rps else None,
        max_tokens_per_s=config.max_tokens_per_s / workers if config.max_tokens_per_s else None,
    )


def run_shard_task(config: JobConfig) -> dict[str, Any]:
    """One shard in a worker process or a Dask task: its partial goes to ``config.partial_out``.

    A RagbatchError comes back as data (raised again by :func:`finish`): some subclasses (``DatasetError(path, line, …)``)
    cannot be rebuilt by pickle from their message alone.
    """
    try:
        result = run_job(config)
    except RagbatchError as exc:
        return {"error": str(exc), "kind": type(exc).__name__, "exitCode": exc.exit_code}
    record = result.record
    return {
        "rows": record["rows"],
        "wallSeconds": record["wallSeconds"],
        "rowsPerSecond": record["rowsPerSecond"],
        "cache": record.get("cache"),
    }


def finish(
    config: JobConfig,
    partials: list[Path],
    results: list[dict[str, Any]],
    started: float,
    facts: dict[str, Any],
) -> JobResult:
    """Raise a shard's error, else merge the partials and write the report (and run record)."""
    for k, done in enumerate(results, start=1):
        if "error" in done:
            error = RagbatchError(f"shard {k}/{len(results)}: {done['error']}")
            error.exit_code = done["exitCode"]
            raise error
    info, outcomes = merge_partials(partials)
    # the shards skipped their own rows[]; the merged report follows the caller's limit
    report = summarize(outcomes, replace(info, max_report_rows=config.max_report_rows))
    data = report_bytes(report)
    if config.out is not None:
        write_bytes(config.out, data)
    wall = time.perf_counter() - started
    rate = len(outcomes) / wall if wall > 0 else 0.0
    record = {"rows": len(outcomes), "wallSeconds": wall, "rowsPerSecond": rate, **facts}
    record["shardRuns"] = results
    if config.run_record is not None:
        write_bytes(config.run_record, orjson.dumps(record, option=orjson.OPT_INDENT_2) + b"\n")
    return JobResult(report, data, wall, rate, record)


def run_workers(config: JobConfig, workers: int) -> JobResult:
    """Run ``workers`` shard processes and merge their partials into one report."""
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ragbatch-workers-") as tmp:
        partials = [Path(tmp) / f"part-{k}-of-{workers}.jsonl" for k in range(1, workers + 1)]
        configs = [shard_config(config, k, workers, p) for k, p in enumerate(partials, start=1)]
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
            results = list(pool.map(run_shard_task, configs))
        return finish(config, partials, results, started, {"workers": workers})
