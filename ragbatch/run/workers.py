"""Several processes on one machine: shard, run, merge (process I/O; no evaluation logic).

``--workers W`` starts W processes (spawned, so each has its own interpreter and core), each
evaluating shard k/W with 1/W of the concurrency and of the rate budgets, all sharing the
cache directory (diskcache is safe across processes). The partial results are merged with
the same code as ``ragbatch merge``, so the report equals a single-process report; each worker's
``--rows-out`` goes to its own file, interleaved back into input order at the end.

Workers never outlive their run: SIGINT/SIGTERM of the parent is passed on to them as SIGTERM
(each stops sending and closes the cache), and a worker whose parent is killed outright
(``kill -9``) notices within a fraction of a second and stops the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import math
import multiprocessing
import os
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

import orjson

from ragbatch.core.errors import EXIT_ABORTED, Interrupted, RagbatchError
from ragbatch.data.formats import open_dataset
from ragbatch.data.output import atomic_file
from ragbatch.report.builder import summarize
from ragbatch.report.models import Report, report_bytes
from ragbatch.report.rows_out import RowsWriter, merge_rows
from ragbatch.run.factory import jev_settings, load_pricing, spend_limit
from ragbatch.run.job import (
    JobConfig,
    JobResult,
    check_outputs,
    failures_of,
    run_job,
    write_bytes,
)
from ragbatch.run.preflight import check_slice_fields, option_warnings
from ragbatch.run.progress import count_lines
from ragbatch.run.shards import merge_partials, shard_of
from ragbatch.run.split import RowPlan, check_duplicate_ids, part_source, plan_rows
from ragbatch.run.stop import SIGNALS, StopWatch
from ragbatch.run.summary import merge_summaries, read_summary


def shard_config(
    config: JobConfig, k: int, workers: int, partial: Path, rows: Path | None = None
) -> JobConfig:
    """The options of worker k: its shard, its own files and its share of every budget
    (concurrency, --max-rps, --max-tokens-per-s, --max-cost), so their sum stays the run's."""
    return replace(
        config,
        shard=(k, workers),
        partial_out=partial,
        rows_out=rows,
        out=None,
        run_record=None,
        max_report_rows=0,  # the shard's own report is not written: skip its rows
        concurrency=max(1, math.ceil(config.concurrency / workers)),
        max_rps=config.max_rps / workers if config.max_rps else None,
        max_tokens_per_s=config.max_tokens_per_s / workers if config.max_tokens_per_s else None,
        # each part reserves against its share: the parts together never pass the limit
        max_cost=config.max_cost / workers if config.max_cost is not None else None,
    )


def run_shard_task(config: JobConfig, stop: StopWatch | None = None) -> dict[str, Any]:
    """One shard in a worker process or a Dask task: its partial goes to ``config.partial_out``.

    A RagbatchError comes back as data (raised again by :func:`finish`): some subclasses
    (``DatasetError(path, line, …)``) cannot be rebuilt by pickle from their message alone.
    """
    try:
        result = run_job(config, stop=stop)
    except RagbatchError as exc:
        return {"error": str(exc), "kind": type(exc).__name__, "exitCode": exc.exit_code}
    record = result.record
    return {
        "rows": record["rows"],
        "wallSeconds": record["wallSeconds"],
        "rowsPerSecond": record["rowsPerSecond"],
        "cache": record.get("cache"),
    }


def raise_shard_error(results: list[dict[str, Any]]) -> None:
    """Raise the first shard's error, if any shard failed."""
    for k, done in enumerate(results, start=1):
        if "error" in done:
            error = RagbatchError(f"shard {k}/{len(results)}: {done['error']}")
            error.exit_code = done["exitCode"]
            raise error


def finish(
    config: JobConfig,
    partials: list[Path],
    results: list[dict[str, Any]],
    started: float,
    facts: dict[str, Any],
    row_files: list[Path] | None = None,
) -> JobResult:
    """Raise a shard's error, else merge the partials and write the report (and run record);
    with ``row_files`` (each shard's --rows-out), merge those into ``config.rows_out`` too."""
    raise_shard_error(results)
    info, outcomes = merge_partials(partials)
    if config.rows_out is not None and row_files is not None:
        shards = len(row_files)
        merge_rows(config.rows_out, row_files, (shard_of(o.row.id, shards) - 1 for o in outcomes))
    # the shards skipped their own rows[]; the merged report follows the caller's limit
    report = summarize(outcomes, replace(info, max_report_rows=config.max_report_rows))
    record = {"failuresByKind": failures_of(outcomes)}
    return write_outputs(config, report, started, {**facts, **record, "shardRuns": results})


def finish_parts(
    config: JobConfig,
    plan: RowPlan,
    summaries: list[bytes],
    results: list[dict[str, Any]],
    started: float,
    facts: dict[str, Any],
    row_files: list[Path] | None = None,
) -> JobResult:
    """Raise a part's error, else merge the parts' summaries in input order, concatenate
    their rows files into ``config.rows_out`` and write the report (and run record)."""
    raise_shard_error(results)
    whole = merge_summaries([read_summary(data) for data in summaries], config.max_report_rows)
    check_duplicate_ids([whole.ids], plan)
    if config.rows_out is not None and row_files is not None:
        concatenate(row_files, config.rows_out)
    report = whole.builder.report(dataset_sha256=plan.sha256)
    record = {"failuresByKind": whole.calls.failures.record()}
    return write_outputs(config, report, started, {**facts, **record, "shardRuns": results})


def concatenate(parts: list[Path], target: Path) -> None:
    """``parts`` one after the other into ``target`` (atomically)."""
    with atomic_file(target, RowsWriter.SUFFIX) as out:
        for part in parts:
            with part.open("rb") as handle:
                shutil.copyfileobj(handle, out)


def write_outputs(
    config: JobConfig, report: Report, started: float, facts: dict[str, Any]
) -> JobResult:
    """Write the merged report and the run record (rows, wall, ``facts``)."""
    data = report_bytes(report)
    if config.out is not None:
        write_bytes(config.out, data)
    wall = time.perf_counter() - started
    if "mergeStarted" in facts:
        facts = {**facts, "mergeSeconds": time.perf_counter() - facts.pop("mergeStarted")}
    rows = report.dataset.rows
    rate = rows / wall if wall > 0 else 0.0
    record = {"rows": rows, "wallSeconds": wall, "rowsPerSecond": rate, **facts}
    if config.run_record is not None:
        write_bytes(config.run_record, orjson.dumps(record, option=orjson.OPT_INDENT_2) + b"\n")
    return JobResult(report, data, wall, rate, record)


def worker_main(config: JobConfig, parent_pid: int, result: Path) -> None:
    """A worker process: run one shard and leave its outcome in ``result`` for the parent.

    Ctrl-C reaches the whole process group; only the parent acts on it (it sends each worker
    SIGTERM), so the workers ignore SIGINT. A worker whose parent dies stops by itself
    (:func:`ragbatch.run.stop.parent_watch`).
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not the parent's handler, if forked
    stop = StopWatch(signals=(signal.SIGTERM,), parent_pid=parent_pid)
    done = run_shard_task(config, stop)
    if not stop.orphaned:
        result.write_bytes(orjson.dumps(done))
        return
    # nobody will read a result or remove the parent's temporary directory: the last worker
    # out removes it (a stopped worker wrote no partial and discarded its rows file)
    with contextlib.suppress(OSError):
        result.parent.rmdir()


def _lost(exitcode: int | None) -> dict[str, Any]:
    """The outcome of a worker that left no result (killed, or crashed with a traceback)."""
    if exitcode is not None and exitcode < 0:
        name = signal.Signals(-exitcode).name
        message = f"the worker was killed by {name}; rerun to resume from the cache"
        return {"error": message, "exitCode": EXIT_ABORTED}
    message = f"the worker exited with code {exitcode} (see its message above)"
    return {"error": message, "exitCode": 1}


GRACE_S = 5.0  # a signalled worker closes its cache and exits; past this it is killed


def worker_context() -> multiprocessing.context.BaseContext:
    """How workers start without importing everything again (as a spawned one would: about
    0.4 s of CPU each): forked from this process when it runs one thread (the CLI), else from
    a fork server that imported the job code once (a fresh interpreter: forking a process
    with other threads running could copy a lock one of them holds, and a child forked inside
    a running event loop could not start its own)."""
    if threading.active_count() == 1 and not in_event_loop():
        return multiprocessing.get_context("fork")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([__name__])
    return context


def in_event_loop() -> bool:
    """Whether this thread is inside a running asyncio loop (the Python API's)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def end_processes(processes: list[BaseProcess], grace_s: float = GRACE_S) -> None:
    """Send every started worker SIGTERM, wait up to ``grace_s`` for all of them, then kill
    the ones left: nothing the run started outlives it."""
    started = [p for p in processes if p.pid is not None]
    for process in started:
        if process.exitcode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGTERM)  # type: ignore[arg-type]
    deadline = time.monotonic() + grace_s
    for process in started:
        process.join(max(0.0, deadline - time.monotonic()))
    for process in started:
        if process.exitcode is None:
            process.kill()
            process.join()


def run_processes(configs: list[JobConfig], results: list[Path]) -> list[dict[str, Any]]:
    """Start one worker process per config and wait for all of them.

    On SIGINT or SIGTERM the parent ends every worker itself (:func:`end_processes`: SIGTERM,
    then SIGKILL after a grace period), even one still starting, and raises
    :class:`Interrupted`.
    """
    context: Any = worker_context()
    processes: list[BaseProcess] = [
        context.Process(target=worker_main, args=(c, os.getpid(), r), name=f"ragbatch-worker-{k}")
        for k, (c, r) in enumerate(zip(configs, results, strict=True), start=1)
    ]
    received: list[int] = []

    def on_signal(signum: int, frame: object) -> None:
        received.append(signum)
        raise _Stop

    previous = {s: signal.signal(s, on_signal) for s in SIGNALS}
    # a forked worker's garbage collector would otherwise walk (and so copy, page by page)
    # every object the parent had: frozen, they are left alone
    gc.freeze()
    try:
        for process in processes:
            process.start()
        gc.unfreeze()
        for process in processes:
            process.join()
    except BaseException:  # a signal, or the parent failed: its workers must not go on
        # no second signal may cut the clean-up short
        for signum in SIGNALS:
            signal.signal(signum, lambda n, f: received.append(n))
        end_processes(processes)
        if not received:
            raise
    finally:
        gc.unfreeze()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    if received:
        name = signal.Signals(received[0]).name
        raise Interrupted(
            f"interrupted by {name}: the workers stopped, no report written; every finished "
            f"reply is in the cache ({configs[0].cache_dir}), rerun the same command to resume",
            received[0],
        )
    return [
        orjson.loads(path.read_bytes()) if path.exists() else _lost(process.exitcode)
        for process, path in zip(processes, results, strict=True)
    ]


class _Stop(Exception):
    """Raised in the parent by a signal, to leave the wait for its workers at once."""


def part_table_limit(config: JobConfig, plan: RowPlan) -> int | None:
    """A part's --max-report-rows: the run's when the whole keeps its rows[] table, else 0
    (no part builds or sends a table the merge would drop)."""
    limit = config.max_report_rows
    return limit if limit is None or plan.rows <= limit else 0


def available_cores() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def dataset_rows(config: JobConfig, plan: RowPlan | None) -> int | None:
    """Rows in the dataset (planned for a JSONL file; other formats are read), or None when
    unknown (the run itself reports a bad file)."""
    if plan is not None:
        return plan.rows
    if config.source is not None:
        return None
    if config.format == "jsonl":
        return count_lines(str(config.dataset))
    reader = open_dataset(
        config.dataset,
        config.format,
        mapping=config.mapping,
        outputs=config.outputs,
        ignore_unknown_fields=config.ignore_unknown_fields,
    )
    return sum(1 for _ in reader)


def cap_workers(
    config: JobConfig, workers: int, warn: Callable[[str], None], plan: RowPlan | None = None
) -> int:
    """``workers``, at most one per row and one per core; ``warn`` says when it was capped
    (each process costs an interpreter start, and more than the cores only share them)."""
    rows, cores = dataset_rows(config, plan), available_cores()
    limits = [(cores, f"{cores} core" + "s" * (cores != 1))]
    if rows is not None:
        limits.insert(0, (max(rows, 1), f"{rows} row" + "s" * (rows != 1)))
    reasons = [text for limit, text in limits if limit < workers]
    capped = min([workers, *(limit for limit, _ in limits)])
    if capped < workers:
        warn(
            f"--workers {workers} capped at {capped} ({', '.join(reasons)}): more processes "
            "than rows or cores only add start-up time"
        )
    return capped


def run_workers(
    config: JobConfig, workers: int, warn: Callable[[str], None] | None = None
) -> JobResult:
    """Run ``workers`` shard processes (capped by :func:`cap_workers`) and merge their
    partials into one report; one process left runs the job in this one."""
    started = time.perf_counter()
    check_outputs(config)  # refused here, before any worker starts
    spend_limit(config, load_pricing(config.pricing))
    say = warn or (lambda _: None)
    jsonl = config.format == "jsonl" and config.source is None
    plan = plan_rows(config.dataset) if jsonl else None  # one read of the file, no parsing
    workers = cap_workers(config, workers, say, plan)
    if workers == 1:
        return run_job(config, say, stop=StopWatch())
    jev_settings(config)  # a key that cannot be sent is refused before any worker starts
    check_slice_fields(config)  # before any worker starts (the workers' warnings go unheard)
    for warning in option_warnings(config):
        say(warning)
    with tempfile.TemporaryDirectory(prefix="ragbatch-workers-") as tmp:
        shards = range(1, workers + 1)
        partials = [Path(tmp) / f"part-{k}-of-{workers}.jsonl" for k in shards]
        # each worker streams its rows to its own file beside the final one (the same disk,
        # not a small /tmp); the parent interleaves them at the end and removes them
        target = config.rows_out
        rows = (
            [target.with_name(f".{target.name}.{k}-of-{workers}") for k in shards]
            if target
            else None
        )
        configs = [
            shard_config(config, k, workers, partials[k - 1], rows[k - 1] if rows else None)
            for k in shards
        ]
        if plan is not None:  # each worker reads, parses and summarizes only its own rows
            ignore = config.ignore_unknown_fields
            configs = [
                replace(
                    c,
                    source=part_source(plan, k, workers, ignore_unknown=ignore),
                    max_report_rows=part_table_limit(config, plan),
                )
                for k, c in zip(shards, configs, strict=True)
            ]
        try:
            results = run_processes(configs, [Path(tmp) / f"result-{k}.json" for k in shards])
            # the parent's serial part: from the last worker's end to the report written
            facts: dict[str, Any] = {"workers": workers, "mergeStarted": time.perf_counter()}
            if plan is None:
                return finish(config, partials, results, started, facts, rows)
            raise_shard_error(results)
            summaries = [path.read_bytes() for path in partials]
            return finish_parts(config, plan, summaries, results, started, facts, rows)
        finally:
            for path in rows or ():  # a killed worker leaves its rows unfinished
                path.unlink(missing_ok=True)
                RowsWriter.part_of(path).unlink(missing_ok=True)
