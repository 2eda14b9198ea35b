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
same way. The signals are held back while a worker is forked (:func:`~ragbatch.run._stop.
signals_held`): one that lands then is heard by the parent as soon as the fork is done, and
by the new worker as soon as it has its own handling, before it sends anything.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import importlib
import multiprocessing
import multiprocessing.forkserver
import os
import signal
import tempfile
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import wait
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

import orjson

from ragbatch.core import EXIT_ABORTED, Interrupted
from ragbatch.report import RowsWriter
from ragbatch.run._config import JobResult
from ragbatch.run._items import open_source_items
from ragbatch.run._job import cache_written, run_checked
from ragbatch.run._options import RunOptions
from ragbatch.run._parts import (
    finish,
    finish_parts,
    part_of,
    part_table_limit,
    raise_shard_error,
    run_shard_task,
    shard_config,
)
from ragbatch.run._preflight import Checked, ignore, preflight, rows_warning
from ragbatch.run._probe_report import check_probed_rows
from ragbatch.run._progress import count_lines
from ragbatch.run._split import RowPlan, part_source, plan_rows
from ragbatch.run._stop import SIGNALS, RunCanceller, interrupted_message, signals_held

__all__ = [
    "cap_workers",
    "run_checked_workers",
    "run_shard_task",
    "run_workers",
    "shard_config",
    "worker_main",
]


def worker_main(part: Checked, parent_pid: int, result: Path) -> None:
    """A worker process: run one part and leave its outcome in ``result`` for the parent.

    Ctrl-C reaches the whole process group; only the parent acts on it (it sends each worker
    SIGTERM), so the workers ignore SIGINT. The worker starts with both signals held (forked
    inside :func:`~ragbatch.run._stop.signals_held`) and lets them through once its own
    handling is in place: a SIGTERM sent meanwhile stops it before its first request. A worker
    whose parent dies stops by itself (:func:`ragbatch.run._stop.parent_watch`).
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    stop = RunCanceller(signals=(signal.SIGTERM,), parent_pid=parent_pid)
    with stop.catching():
        signal.pthread_sigmask(signal.SIG_UNBLOCK, SIGNALS)
        done = run_shard_task(part, stop)
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
    # started here, not inside the first start() (where the signals are held): the server
    # lets them through, as any process the run leaves to multiprocessing should
    multiprocessing.forkserver.ensure_running()
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


def start_processes(processes: list[BaseProcess], stop: RunCanceller) -> None:
    """Start the workers one by one, each fork with the signals held; stop starting once a
    signal came (the ones started are ended by the caller)."""
    for process in processes:
        with signals_held():
            process.start()
        if stop.stopped:  # it landed during that fork: heard now that the signals pass
            return


def wait_processes(processes: list[BaseProcess], stop: RunCanceller) -> None:
    """Wait until every worker has ended, or a signal came (its handler wakes this wait)."""
    alive = {p.sentinel: p for p in processes if p.pid is not None}  # started ones
    wakeup = [stop.wakeup_fd] if stop.wakeup_fd is not None else []
    while alive and not stop.stopped:
        for ready in wait([*alive, *wakeup]):
            if ready in alive:
                alive.pop(ready).join()


def run_processes(
    parts: list[Checked], results: list[Path], stop: RunCanceller
) -> list[dict[str, Any]]:
    """Start one worker process per part and wait for all of them (``stop`` catching).

    On SIGINT or SIGTERM, even during a fork, the parent ends every worker it started itself
    (:func:`end_processes`: SIGTERM, then SIGKILL after a grace period) and raises
    :class:`Interrupted`.
    """
    context: Any = worker_context()
    processes: list[BaseProcess] = [
        context.Process(target=worker_main, args=(p, os.getpid(), r), name=f"ragbatch-worker-{k}")
        for k, (p, r) in enumerate(zip(parts, results, strict=True), start=1)
    ]
    # a forked worker's garbage collector would otherwise walk (and so copy, page by page)
    # every object the parent had: frozen, they are left alone
    gc.freeze()
    try:
        start_processes(processes, stop)
        gc.unfreeze()
        wait_processes(processes, stop)
    except BaseException:  # the parent failed: its workers must not go on
        end_processes(processes)
        raise
    finally:
        gc.unfreeze()
    if stop.signum is not None:
        end_processes(processes)
        raise workers_interrupted(stop.signum, parts[0])
    return [
        orjson.loads(path.read_bytes()) if path.exists() else _lost(process.exitcode)
        for process, path in zip(processes, results, strict=True)
    ]


def workers_interrupted(signum: int, part: Checked) -> Interrupted:
    """The error of a workers' run a signal stopped."""
    cause = f"interrupted by {signal.Signals(signum).name}: the workers stopped,"
    return Interrupted(interrupted_message(cause, cache_written(part.options)), signum)


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
    return sum(1 for _ in open_source_items(i).items())


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
    config: RunOptions,
    workers: int,
    warn: Callable[[str], None] = ignore,
    canceller: RunCanceller | None = None,
) -> JobResult:
    """Check the run ``config`` describes (``warn`` hears its warnings), run it in ``workers``
    processes (capped by :func:`cap_workers`) and merge their results into one report; one
    process left runs the job in this one. SIGINT and SIGTERM stop it cleanly
    (``canceller``'s, else its own: nothing it starts outlives it)."""
    stop = canceller or RunCanceller()
    with stop.catching():
        return _run_workers(preflight(config, warn), workers, warn, stop)


def run_checked_workers(
    checked: Checked,
    workers: int,
    warn: Callable[[str], None] = ignore,
    canceller: RunCanceller | None = None,
) -> JobResult:
    """:func:`run_workers` of a run :func:`~ragbatch.run._preflight.preflight` checked."""
    stop = canceller or RunCanceller()
    with stop.catching():
        return _run_workers(checked, workers, warn, stop)


def _run_workers(
    checked: Checked, workers: int, warn: Callable[[str], None], stop: RunCanceller
) -> JobResult:
    started = time.perf_counter()
    config = checked.options
    i = config.input
    jsonl = i.format == "jsonl" and i.source is None
    plan = plan_rows(i.dataset) if jsonl else None  # one read of the file, no parsing
    workers = cap_workers(config, workers, warn, plan)
    if workers == 1:
        return run_checked(checked, warn, stop)
    if stop.signum is not None:  # before any worker starts
        raise workers_interrupted(stop.signum, checked)
    if (warning := rows_warning(config, plan.rows if plan is not None else None)) is not None:
        warn(warning)  # the workers' own warnings go unheard
    if config.audit.probes:  # before anything is sent: the parent probes the merged rows
        check_probed_rows(config, dataset_rows(config, plan))
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
        parts = [
            part_of(checked, k, workers, partials[k - 1], rows[k - 1] if rows else None)
            for k in shards
        ]
        if plan is not None:  # each worker reads, parses and summarizes only its own rows
            ignore_unknown, html = i.ignore_unknown_fields, config.output.html is not None
            sources = [
                part_source(plan, k, workers, ignore_unknown=ignore_unknown, keep_texts=html)
                for k in shards
            ]
            table = part_table_limit(config, plan)
            parts = [
                p.replace(source=s, max_report_rows=table)
                for p, s in zip(parts, sources, strict=True)
            ]
        try:
            results = run_processes(parts, [Path(tmp) / f"result-{k}.json" for k in shards], stop)
            # the parent's serial part: from the last worker's end to the report written
            facts: dict[str, Any] = {"workers": workers, "mergeStarted": time.perf_counter()}
            if plan is None:
                return finish(config, partials, results, started, facts, rows, checked)
            raise_shard_error(results)
            summaries = [path.read_bytes() for path in partials]
            return finish_parts(config, plan, summaries, results, started, facts, rows, checked)
        finally:
            for path in rows or ():  # a killed worker leaves its rows unfinished
                path.unlink(missing_ok=True)
                for part in RowsWriter.leftovers_of(path):
                    part.unlink(missing_ok=True)
