"""Several processes on one machine: split, run, merge (process I/O; no evaluation logic).

``--workers W`` starts W processes (forked from a one-thread parent, else from a fork server:
no interpreter start each), each with 1/W of the concurrency and of every budget, all sharing
the cache directory (diskcache is safe across processes). For a JSONL file each worker reads,
parses and summarizes only its own consecutive rows (:mod:`ragbatch.run._split`) and the
parent merges the summaries in order (:mod:`ragbatch.run._summary`) and concatenates the
``--rows-out`` parts; other formats run shard k/W by hash of id and merge partials with the
code of ``ragbatch merge``. Either way the report equals a single-process report.

Workers never outlive their run: on SIGINT/SIGTERM the parent ends them itself (SIGTERM, then
SIGKILL after a grace period; each stops sending and closes the cache), and a worker whose
parent is killed outright (``kill -9``) notices within a fraction of a second and stops the
same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import importlib
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

from ragbatch._files import atomic_file, write_bytes
from ragbatch.core import EXIT_ABORTED, Interrupted, RagbatchError
from ragbatch.data import open_dataset
from ragbatch.report import Report, RowsWriter, merge_rows, report_bytes, summarize
from ragbatch.run._calls import failures_of
from ragbatch.run._config import JobResult
from ragbatch.run._factory import jev_settings, load_pricing, spend_limit
from ragbatch.run._job import run_job, run_part_job
from ragbatch.run._options import RunOptions
from ragbatch.run._preflight import check_outputs, check_slice_fields, option_warnings
from ragbatch.run._progress import count_lines
from ragbatch.run._shards import merge_partials, shard_of
from ragbatch.run._split import RowPlan, check_duplicate_ids, part_source, plan_rows
from ragbatch.run._stop import SIGNALS, RunCanceller, interrupted_message
from ragbatch.run._summary import merge_summaries, read_summary


def shard_config(
    config: RunOptions, k: int, workers: int, partial: Path, rows: Path | None = None
) -> RunOptions:
    """The options of worker k: its shard, its own files and its share of every budget
    (concurrency, --max-rps, --max-tokens-per-s, --max-cost), so their sum stays the run's."""
    rate, max_cost = config.rate, config.limits.max_cost
    return config.replace(
        shard=f"{k}/{workers}",
        workers=1,
        dask=None,
        partial_out=partial,
        rows_out=rows,
        flush_rows=False,  # read back whole by the parent; a crash discards it
        out=None,
        run_record=None,
        markdown=None,  # the parent writes the views of the merged report
        html=None,
        max_report_rows=0,  # the shard's own report is not written: skip its rows
        concurrency=max(1, math.ceil(rate.concurrency / workers)),
        max_rps=rate.max_rps / workers if rate.max_rps else None,
        max_tokens_per_s=rate.max_tokens_per_s / workers if rate.max_tokens_per_s else None,
        # each part reserves against its share: the parts together never pass the limit
        max_cost=max_cost / workers if max_cost is not None else None,
    )


def run_shard_task(config: RunOptions, stop: RunCanceller | None = None) -> dict[str, Any]:
    """One shard in a worker process or a Dask task: its partial goes to ``config.partial_out``.

    A RagbatchError comes back as data (raised again by :func:`finish`): some subclasses
    (``DatasetError(path, line, …)``) cannot be rebuilt by pickle from their message alone.
    """
    try:
        record = run_part_job(config, canceller=stop)
    except RagbatchError as exc:
        return {"error": str(exc), "kind": type(exc).__name__, "exitCode": exc.exit_code}
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
    config: RunOptions,
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
    rows_out = config.output.rows_out
    if rows_out is not None and row_files is not None:
        shards = len(row_files)
        merge_rows(rows_out, row_files, (shard_of(o.row.id, shards) - 1 for o in outcomes))
    # the shards skipped their own rows[]; the merged report follows the caller's limit
    report = summarize(outcomes, replace(info, max_report_rows=config.output.max_report_rows))
    record = {"failuresByKind": failures_of(outcomes)}
    html = config.output.html is not None  # the HTML view shows questions and answers
    texts = {o.row.id: (o.row.question, o.row.answer) for o in outcomes if html}
    facts = {**facts, **record, "shardRuns": results}
    return write_merged(config, report, started, facts, texts)


def finish_parts(
    config: RunOptions,
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
    limit = config.output.max_report_rows
    whole = merge_summaries([read_summary(data) for data in summaries], limit)
    check_duplicate_ids([whole.ids], plan)
    if config.output.rows_out is not None and row_files is not None:
        concatenate(row_files, config.output.rows_out)
    report = whole.builder.report(dataset_sha256=plan.sha256)
    record = {"failuresByKind": whole.calls.failures.record()}
    facts = {**facts, **record, "shardRuns": results}
    return write_merged(config, report, started, facts, whole.texts)


def concatenate(parts: list[Path], target: Path) -> None:
    """``parts`` one after the other into ``target`` (atomically)."""
    with atomic_file(target, RowsWriter.SUFFIX) as out:
        for part in parts:
            with part.open("rb") as handle:
                shutil.copyfileobj(handle, out)


def write_merged(
    config: RunOptions,
    report: Report,
    started: float,
    facts: dict[str, Any],
    texts: dict[str, tuple[str, str]],
) -> JobResult:
    """Write the merged report and the run record (rows, wall, ``facts``); the views are
    written by the caller from the result's ``texts`` (each row's question and answer)."""
    data = report_bytes(report)
    if config.output.out is not None:
        write_bytes(config.output.out, data)
    wall = time.perf_counter() - started
    if "mergeStarted" in facts:
        facts = {**facts, "mergeSeconds": time.perf_counter() - facts.pop("mergeStarted")}
    rows = report.dataset.rows
    rate = rows / wall if wall > 0 else 0.0
    record = {"rows": rows, "wallSeconds": wall, "rowsPerSecond": rate, **facts}
    if config.output.run_record is not None:
        data_record = orjson.dumps(record, option=orjson.OPT_INDENT_2) + b"\n"
        write_bytes(config.output.run_record, data_record)
    return JobResult(report, data, wall, rate, record, texts)


def cache_written(config: RunOptions) -> str | None:
    """The cache directory the workers' finished replies went to (None: no reply cache)."""
    cached = config.jev.provider == "jev" and not config.cache.no_cache
    return str(config.cache.cache_dir) if cached else None


def worker_main(config: RunOptions, parent_pid: int, result: Path) -> None:
    """A worker process: run one shard and leave its outcome in ``result`` for the parent.

    Ctrl-C reaches the whole process group; only the parent acts on it (it sends each worker
    SIGTERM), so the workers ignore SIGINT. A worker whose parent dies stops by itself
    (:func:`ragbatch.run._stop.parent_watch`).
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not the parent's handler, if forked
    stop = RunCanceller(signals=(signal.SIGTERM,), parent_pid=parent_pid)
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
# What a worker would import on its first use (anyio loads its event-loop backend only when
# a loop starts): imported before the workers start, so each does not import it again.
CHILD_IMPORTS = ("anyio._backends._asyncio", "anyio._core._signals")


def worker_context() -> multiprocessing.context.BaseContext:
    """How workers start without importing everything again (as a spawned one would: about
    0.4 s of CPU each): forked from this process when it runs one thread (the CLI), else from
    a fork server that imported the job code once (a fresh interpreter: forking a process
    with other threads running could copy a lock one of them holds, and a child forked inside
    a running event loop could not start its own)."""
    if threading.active_count() == 1 and not in_event_loop():
        for module in CHILD_IMPORTS:  # once here, not once in every worker
            importlib.import_module(module)
        return multiprocessing.get_context("fork")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([__name__, *CHILD_IMPORTS])
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


def run_processes(configs: list[RunOptions], results: list[Path]) -> list[dict[str, Any]]:
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
        cause = f"interrupted by {name}: the workers stopped,"
        raise Interrupted(interrupted_message(cause, cache_written(configs[0])), received[0])
    return [
        orjson.loads(path.read_bytes()) if path.exists() else _lost(process.exitcode)
        for process, path in zip(processes, results, strict=True)
    ]


class _Stop(Exception):
    """Raised in the parent by a signal, to leave the wait for its workers at once."""


def part_table_limit(config: RunOptions, plan: RowPlan) -> int | None:
    """A part's --max-report-rows: the run's when the whole keeps its rows[] table, else 0
    (no part builds or sends a table the merge would drop)."""
    limit = config.output.max_report_rows
    return limit if limit is None or plan.rows <= limit else 0


def available_cores() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def dataset_rows(config: RunOptions, plan: RowPlan | None) -> int | None:
    """Rows in the dataset (planned for a JSONL file; other formats are read), or None when
    unknown (the run itself reports a bad file)."""
    i = config.input
    if plan is not None:
        return plan.rows
    if i.source is not None:
        return None
    if i.format == "jsonl":
        return count_lines(str(i.dataset))
    reader = open_dataset(
        i.dataset,
        i.format,
        mapping=i.mapping,
        outputs=i.outputs,
        ignore_unknown_fields=i.ignore_unknown_fields,
    )
    return sum(1 for _ in reader)


def cap_workers(
    config: RunOptions, workers: int, warn: Callable[[str], None], plan: RowPlan | None = None
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
    config: RunOptions, workers: int, warn: Callable[[str], None] | None = None
) -> JobResult:
    """Run ``workers`` shard processes (capped by :func:`cap_workers`) and merge their
    partials into one report; one process left runs the job in this one."""
    started = time.perf_counter()
    check_outputs(config)  # refused here, before any worker starts
    spend_limit(config, load_pricing(config.policy.pricing))
    say = warn or (lambda _: None)
    i = config.input
    jsonl = i.format == "jsonl" and i.source is None
    plan = plan_rows(i.dataset) if jsonl else None  # one read of the file, no parsing
    workers = cap_workers(config, workers, say, plan)
    if workers == 1:
        return run_job(config, say, RunCanceller())
    jev_settings(config)  # a key that cannot be sent is refused before any worker starts
    check_slice_fields(config)  # before any worker starts (the workers' warnings go unheard)
    for warning in option_warnings(config):
        say(warning)
    with tempfile.TemporaryDirectory(prefix="ragbatch-workers-") as tmp:
        shards = range(1, workers + 1)
        partials = [Path(tmp) / f"part-{k}-of-{workers}.jsonl" for k in shards]
        # each worker streams its rows to its own file beside the final one (the same disk,
        # not a small /tmp); the parent interleaves them at the end and removes them
        target = config.output.rows_out
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
            ignore, html = i.ignore_unknown_fields, config.output.html is not None
            configs = [
                c.replace(
                    source=part_source(plan, k, workers, ignore_unknown=ignore, keep_texts=html),
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
                for part in RowsWriter.leftovers_of(path):
                    part.unlink(missing_ok=True)
