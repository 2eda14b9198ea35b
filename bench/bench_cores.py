"""Does ``--workers W`` scale? Wall, rows/s, speedup and total CPU of every process.

    python bench/bench_cores.py [--rows 48000] [--max-workers 16] [--dask]

Writes one synthetic file (bench/synth.py), then runs ``ragbatch run`` (mock pipeline,
``--rows-out``, ``--max-report-rows 1000``) as a separate process with 1, 2, 4, ... workers
up to ``os.cpu_count()`` (or ``--max-workers``, e.g. 8 on a 2-core box: past the cores the
speedup cannot grow, but the total CPU shows whether work is repeated). Per case: whole-process
wall, rows/s, speedup against one process, and the CPU seconds of all the run's processes
(fork server and workers included, see bench/cpu.py) relative to one process. Each report and
rows file is checked byte-identical to the single-process one. "serial" is the parent's time
from the last worker's end to the report written (the run record's ``mergeSeconds``).
With ``--dask``, also N Dask tasks on a ``LocalCluster`` of N workers (see :func:`dask_case`:
the cluster's start-up is not timed, as for a long-lived cluster).
"""

from __future__ import annotations

import argparse
import importlib
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

import orjson
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.cpu import become_subreaper, measure
from bench.synth import write_dataset

UNCAPPED = (
    "import sys; from ragbatch.run import _workers; _workers.available_cores = lambda: 1024;"
    " from ragbatch.cli import main; sys.argv[0] = 'ragbatch'; main()"
)


def counts(limit: int) -> list[int]:
    out, n = [], 1
    while n <= limit:
        out.append(n)
        n *= 2
    return out if out[-1] == limit else [*out, limit]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=48_000)
    parser.add_argument("--max-workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--dask", action="store_true", help="also --dask local:N (start-up timed)")
    args = parser.parse_args()
    become_subreaper()
    print(f"cores: {os.cpu_count()}, rows: {args.rows}, load: {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory(prefix="bench-cores-") as tmp_name:
        tmp = Path(tmp_name)
        data = write_dataset(tmp / "synth.jsonl", args.rows)
        base: tuple[float, float] | None = None
        cases = [("workers", n) for n in counts(args.max_workers)]
        for engine, n in cases:
            name = f"{engine}{n}"
            out, rows, record = (tmp / f"{name}{s}" for s in (".json", ".jsonl", "-record.json"))
            command = [
                sys.executable, "-c", UNCAPPED, "run", str(data), "--out", str(out),
                "--rows-out", str(rows), "--max-report-rows", "1000", "--quiet",
                "--run-record", str(record), "--workers", str(n),
            ]  # fmt: skip
            m = measure(command)
            if base is None:
                base = (m.wall_s, m.cpu_s)
            else:
                same = out.read_bytes() == (tmp / "workers1.json").read_bytes()
                same &= rows.read_bytes() == (tmp / "workers1.jsonl").read_bytes()
                assert same, f"{name}: report or rows differ from one process"
            merge = orjson.loads(record.read_bytes()).get("mergeSeconds")
            serial = f", serial {merge / base[0]:.1%} of 1-process wall" if merge else ""
            what = f"--workers {n}"
            print(
                f"{what:<22} wall {m.wall_s:6.2f} s, {args.rows / m.wall_s:7.0f} rows/s, "
                f"speedup {base[0] / m.wall_s:5.2f}x, CPU {m.cpu_s:6.2f} s "
                f"({m.cpu_s / base[1]:.2f}x one process){serial}"
            )
        # last: the cluster leaves long-lived helpers (a resource tracker) the reaper would wait on
        for n in counts(args.max_workers) if args.dask else ():
            assert base is not None
            dask_case(data, tmp, n, args.rows, base)


def dask_case(data: Path, tmp: Path, n: int, rows: int, base: tuple[float, float]) -> None:
    """``run_on_dask`` with ``n`` tasks on a ``LocalCluster`` of ``n`` workers, started (and
    the job code imported on each) before the clock: a long-lived cluster's case. The CPU is
    this process's (client and scheduler) plus every worker process's, read before and after.
    """
    from ragbatch.distributed import local_cluster, run_on_dask
    from ragbatch.run import RunOptions

    out, rows_out = tmp / f"dask{n}.json", tmp / f"dask{n}.jsonl"
    config = RunOptions.of(dataset=data, out=out, rows_out=rows_out, max_report_rows=1000)
    with local_cluster(n) as client:
        client.run(importlib.import_module, "ragbatch.run._dask")
        pids = list(client.run(os.getpid).values())
        procs = [psutil.Process(pid) for pid in pids]
        before = sum(sum(p.cpu_times()[:2]) for p in procs) + self_cpu()
        started = time.perf_counter()
        result = run_on_dask(config, n, client)
        wall = time.perf_counter() - started
        cpu = sum(sum(p.cpu_times()[:2]) for p in procs) + self_cpu() - before
    assert out.read_bytes() == (tmp / "workers1.json").read_bytes(), "dask report differs"
    assert rows_out.read_bytes() == (tmp / "workers1.jsonl").read_bytes(), "dask rows differ"
    serial = result.record["mergeSeconds"] / base[0]
    print(
        f"{f'Dask {n} tasks':<22} wall {wall:6.2f} s, {rows / wall:7.0f} rows/s, speedup "
        f"{base[0] / wall:5.2f}x, CPU {cpu:6.2f} s ({cpu / base[1]:.2f}x one process), "
        f"serial {serial:.1%} of 1-process wall"
    )


def self_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


if __name__ == "__main__":
    main()
