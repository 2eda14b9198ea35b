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
as for a long-lived cluster, its start-up is not timed and its idle CPU not counted).

Every run reads its bytecode from a cache of the bench's own (``PYTHONPYCACHEPREFIX``),
filled by an unmeasured one-row run first, as an installed package has its ``.pyc`` files:
with ``PYTHONDONTWRITEBYTECODE`` set, each run would compile ~120 modules again and count it.

Last, one process replays a warm cache ``--offline`` (``--provider jev``; the cache is
filled in-process by :func:`bench.bench_scale.warm_cache`, no server): CPU a row of the
whole process (start-up included) and marginal (the whole run less a one-row run, over the
other rows), the figure the replay goal is about.
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

from bench.bench_scale import MODEL, PRICING, warm_cache
from bench.cpu import become_subreaper, measure
from bench.synth import write_dataset

IDLE_S = 1.0  # how long the cluster's idle CPU is measured before a Dask case
UNCAPPED = (
    "import sys; from ragbatch.run import _workers; _workers.available_cores = lambda: 1024;"
    " from ragbatch.cli import entry; sys.argv[0] = 'ragbatch'; entry()"
)


def counts(limit: int) -> list[int]:
    out, n = [], 1
    while n <= limit:
        out.append(n)
        n *= 2
    return out if out[-1] == limit else [*out, limit]


def bytecode_env(tmp: Path) -> dict[str, str]:
    """Every run's bytecode in one cache under ``tmp`` (see the module's docstring)."""
    env = {**os.environ, "PYTHONPYCACHEPREFIX": str(tmp / "pycache")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


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
        one = write_dataset(tmp / "one.jsonl", 1)
        env = bytecode_env(tmp)
        warm = [sys.executable, "-c", UNCAPPED, "run", str(one), "--quiet", "--out"]
        measure([*warm, str(tmp / "warm.json")], env)  # fills the bytecode cache: not counted
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
            m = measure(command, env)
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
        replay_case(data, one, tmp, env, args.rows)
        # last: the cluster leaves long-lived helpers (a resource tracker) the reaper would wait on
        for n in counts(args.max_workers) if args.dask else ():
            assert base is not None
            dask_case(data, tmp, n, args.rows, base)


def replay_case(data: Path, one: Path, tmp: Path, env: dict[str, str], rows: int) -> None:
    """One process replaying a warm cache ``--offline``: CPU a row, whole and marginal."""
    cache_dir = tmp / "replay-cache"
    warm_cache(data, cache_dir)

    def replay(dataset: Path, name: str) -> float:
        command = [
            sys.executable, "-c", UNCAPPED, "run", str(dataset), "--provider", "jev",
            "--offline", "--model", MODEL, "--cache-dir", str(cache_dir), "--pricing",
            str(PRICING), "--out", str(tmp / f"{name}.json"), "--rows-out",
            str(tmp / f"{name}.jsonl"), "--max-report-rows", "1000", "--quiet",
        ]  # fmt: skip
        return measure(command, env).cpu_s

    replay(one, "replay-warm")  # the cache's pages and the bytecode read once: not counted
    whole, single = replay(data, "replay"), replay(one, "replay-one")
    print(
        f"{'replay (--offline)':<22} CPU {whole:6.2f} s: {1000 * whole / rows:.3f} ms a row "
        f"(whole process), {1000 * (whole - single) / max(1, rows - 1):.3f} ms a row "
        f"marginal (less a one-row run, {single:.2f} s)"
    )


def dask_case(data: Path, tmp: Path, n: int, rows: int, base: tuple[float, float]) -> None:
    """``run_on_dask`` with ``n`` tasks on a ``LocalCluster`` of ``n`` workers, as on a
    long-lived cluster: started, the job code imported on each worker and one small job run
    (one row a task: what a task imports on first use is loaded) before the clock.

    CPU is this process's (client, scheduler and nanny threads) plus every worker's (and
    nanny's, in a process of its own), read before and after the run ("gross"). Those processes spend CPU while the cluster
    idles too (heartbeats, the scheduler's periodic work): that rate, measured over
    :data:`IDLE_S` just before the run, times the run's wall is the cluster's, not the run's;
    "CPU" below is the gross less it, and the ratio is taken on that.
    """
    from ragbatch.distributed import local_cluster, run_on_dask
    from ragbatch.run import RunOptions

    out, rows_out = tmp / f"dask{n}.json", tmp / f"dask{n}.jsonl"
    config = RunOptions.of(dataset=data, out=out, rows_out=rows_out, max_report_rows=1000)
    small = write_dataset(tmp / f"dask-warm-{n}.jsonl", n, seed=1)
    warm = RunOptions.of(dataset=small, out=tmp / "dask-warm.json", rows_out=tmp / "dw.jsonl")
    with local_cluster(n) as client:
        client.run(importlib.import_module, "ragbatch.run._dask")
        run_on_dask(warm, n, client)  # not timed: the cluster has run a job before
        pids = set(client.run(os.getpid).values())
        # and their nannies, when they run in processes of their own (a LocalCluster's run
        # in this one)
        pids |= {psutil.Process(pid).ppid() for pid in pids}
        procs = [psutil.Process(pid) for pid in pids - {os.getpid()}]

        def total() -> float:
            return sum(sum(p.cpu_times()[:2]) for p in procs) + self_cpu()

        idle_from, idle_started = total(), time.perf_counter()
        time.sleep(IDLE_S)
        idle_rate = (total() - idle_from) / (time.perf_counter() - idle_started)
        before = total()
        started = time.perf_counter()
        result = run_on_dask(config, n, client)
        wall = time.perf_counter() - started
        gross = total() - before
    cpu = gross - idle_rate * wall
    assert out.read_bytes() == (tmp / "workers1.json").read_bytes(), "dask report differs"
    assert rows_out.read_bytes() == (tmp / "workers1.jsonl").read_bytes(), "dask rows differ"
    serial = result.record["mergeSeconds"] / base[0]
    print(
        f"{f'Dask {n} tasks':<22} wall {wall:6.2f} s, {rows / wall:7.0f} rows/s, speedup "
        f"{base[0] / wall:5.2f}x, CPU {cpu:6.2f} s ({cpu / base[1]:.2f}x one process; "
        f"gross {gross:.2f} s, idle {idle_rate:.2f} CPU s/s), serial {serial:.1%} of "
        "1-process wall"
    )


def self_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


if __name__ == "__main__":
    main()
