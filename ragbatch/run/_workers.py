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

import contextlib
import math
import multiprocessing
import os
import signal
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson

from ragbatch._files import write_bytes
from ragbatch.core import EXIT_ABORTED, Interrupted, RagbatchError
from ragbatch.data import open_dataset
from ragbatch.report import RowsWriter, merge_rows, report_bytes, summarize
from ragbatch.run._calls import failures_of
from ragbatch.run._config import JobResult
from ragbatch.run._factory import jev_settings, load_pricing, spend_limit
from ragbatch.run._job import run_job
from ragbatch.run._options import RunOptions
from ragbatch.run._preflight import check_outputs, check_slice_fields, option_warnings
from ragbatch.run._progress import count_lines
from ragbatch.run._shards import merge_partials, shard_of
from ragbatch.run._stop import SIGNALS, RunCanceller, interrupted_message


def shard_config(
    config: RunOptions, k: int, workers: int, partial: Path, rows: Path | None = None
) -> RunOptions:
    """The options of worker k: its shard, its own files and its share of every budget."""
    rate = config.rate
    return config.replace(
        shard=f"{k}/{workers}",
        workers=1,
        partial_out=partial,
        rows_out=rows,
        out=None,
        run_record=None,
        markdown=None,  # the parent writes the views of the merged report
        html=None,
        max_report_rows=0,  # the shard's own report is not written: skip its rows
        concurrency=max(1, math.ceil(rate.concurrency / workers)),
        max_rps=rate.max_rps / workers if rate.max_rps else None,
        max_tokens_per_s=rate.max_tokens_per_s / workers if rate.max_tokens_per_s else None,
    )


def run_shard_task(config: RunOptions, stop: RunCanceller | None = None) -> dict[str, Any]:
    """One shard in a worker process or a Dask task: its partial goes to ``config.partial_out``.

    A RagbatchError comes back as data (raised again by :func:`finish`): some subclasses
    (``DatasetError(path, line, …)``) cannot be rebuilt by pickle from their message alone.
    """
    try:
        result = run_job(config, canceller=stop)
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
    config: RunOptions,
    partials: list[Path],
    results: list[dict[str, Any]],
    started: float,
    facts: dict[str, Any],
    row_files: list[Path] | None = None,
) -> JobResult:
    """Raise a shard's error, else merge the partials and write the report (and run record);
    with ``row_files`` (each shard's --rows-out), merge those into ``config.rows_out`` too."""
    for k, done in enumerate(results, start=1):
        if "error" in done:
            error = RagbatchError(f"shard {k}/{len(results)}: {done['error']}")
            error.exit_code = done["exitCode"]
            raise error
    info, outcomes = merge_partials(partials)
    if config.output.rows_out is not None and row_files is not None:
        shards = len(row_files)
        merge_rows(
            config.output.rows_out, row_files, (shard_of(o.row.id, shards) - 1 for o in outcomes)
        )
    # the shards skipped their own rows[]; the merged report follows the caller's limit
    report = summarize(outcomes, replace(info, max_report_rows=config.output.max_report_rows))
    data = report_bytes(report)
    if config.output.out is not None:
        write_bytes(config.output.out, data)
    wall = time.perf_counter() - started
    rate = len(outcomes) / wall if wall > 0 else 0.0
    record = {"rows": len(outcomes), "wallSeconds": wall, "rowsPerSecond": rate, **facts}
    record["failuresByKind"] = failures_of(outcomes)
    record["shardRuns"] = results
    if config.output.run_record is not None:
        write_bytes(
            config.output.run_record, orjson.dumps(record, option=orjson.OPT_INDENT_2) + b"\n"
        )
    html = config.output.html is not None  # the HTML view shows questions and answers
    texts = {o.row.id: (o.row.question, o.row.answer) for o in outcomes if html}
    return JobResult(report, data, wall, rate, record, texts)


def cache_written(config: RunOptions) -> str | None:
    """The cache directory the workers' finished replies went to (None: no reply cache)."""
    cached = config.jev.provider == "jev" and not config.cache.no_cache
    return str(config.cache.cache_dir) if cached else None


def worker_main(config: RunOptions, parent_pid: int, result: Path) -> None:
    """A worker process: run one shard and leave its outcome in ``result`` for the parent.

    Ctrl-C reaches the whole process group; only the parent acts on it (it sends each worker
    SIGTERM), so the workers ignore SIGINT. A worker whose parent dies stops by itself.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
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


def run_processes(configs: list[RunOptions], results: list[Path]) -> list[dict[str, Any]]:
    """Start one spawned process per config and wait for all of them.

    On SIGINT or SIGTERM the parent sends every worker SIGTERM (each stops sending, closes the
    cache and exits), waits for them and raises :class:`Interrupted`.
    """
    context = multiprocessing.get_context("spawn")
    processes = [
        context.Process(
            target=worker_main,
            args=(c, os.getpid(), r),
            name=f"ragbatch-worker-{k}",
        )
        for k, (c, r) in enumerate(zip(configs, results, strict=True), start=1)
    ]
    received: list[int] = []
    signalled: set[int] = set()

    def stop_workers() -> None:
        for process in processes:
            if process.pid is not None and process.pid not in signalled:
                signalled.add(process.pid)
                with contextlib.suppress(ProcessLookupError):
                    os.kill(process.pid, signal.SIGTERM)

    def on_signal(signum: int, frame: object) -> None:
        received.append(signum)
        stop_workers()

    previous = {s: signal.signal(s, on_signal) for s in SIGNALS}
    try:
        for process in processes:
            if received:
                break
            process.start()
        if received:  # a signal during start-up may have missed the last one started
            stop_workers()
        for process in processes:
            if process.pid is not None:
                process.join()
    except BaseException:  # the parent failed: its workers must not go on without it
        stop_workers()
        for process in processes:
            if process.pid is not None:
                process.join()
        raise
    finally:
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


def available_cores() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def dataset_rows(config: RunOptions) -> int | None:
    """Rows in the dataset (a JSONL file's non-blank lines; other formats are read), or None
    when unknown (the run itself reports a bad file)."""
    i = config.input
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


def cap_workers(config: RunOptions, workers: int, warn: Callable[[str], None]) -> int:
    """``workers``, at most one per row and one per core; ``warn`` says when it was capped
    (each process costs an interpreter start, and more than the cores only share them)."""
    rows, cores = dataset_rows(config), available_cores()
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
    workers = cap_workers(config, workers, say)
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
        try:
            results = run_processes(configs, [Path(tmp) / f"result-{k}.json" for k in shards])
            return finish(config, partials, results, started, {"workers": workers}, rows)
        finally:
            for path in rows or ():  # a killed worker leaves its rows unfinished
                path.unlink(missing_ok=True)
                for part in RowsWriter.leftovers_of(path):
                    part.unlink(missing_ok=True)
