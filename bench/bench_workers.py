"""Rows/s of one process, of ``--workers 2`` and of the Dask adapter with 2 shards.

    python bench/bench_workers.py [--rows 4000] [--latency-ms 5] [--concurrency 32]

Starts ``python -m ragbatch.testing.jev_server`` as a separate process with a low service
latency, so the client's CPU (parsing, validation, policy, cache writes) is the bound, not
the server's sleep. Every measurement starts from a fresh cache directory (all requests go
to the server). The Dask figure is ``run_on_dask`` on a ``LocalCluster`` of 2 single-threaded
worker processes; starting the cluster is not timed, the shard tasks, the partials and the
merge are. The server process shares the machine's cores with the clients: the ratios are
bounded by ``os.cpu_count()``, printed first.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_live import KEY, live_config
from bench.synth import write_dataset
from ragbatch.run._config import JobResult
from ragbatch.run._dask import local_cluster, run_on_dask
from ragbatch.run._job import run_job
from ragbatch.run._workers import run_workers


def line(name: str, result: JobResult, base: JobResult | None, server_cpu: float) -> str:
    ratio = f"; ratio to 1 process {result.rows_per_s / base.rows_per_s:.2f}" if base else ""
    return (
        f"{name:<22} {result.rows_per_s:8.1f} rows/s ({result.wall_s:.2f} s; server busy "
        f"{server_cpu / result.wall_s:.0%} of one core){ratio}"
    )


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measured(server: int, run: Callable[[], JobResult]) -> tuple[JobResult, float]:
    """The run's result and the server process's CPU seconds during it."""
    before = cpu_seconds(server)
    result = run()
    return result, cpu_seconds(server) - before


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=4000)
    parser.add_argument("--latency-ms", type=float, default=5)
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args()
    command = [
        sys.executable, "-m", "ragbatch.testing.jev_server", "--port", "0",
        "--latency-ms", str(args.latency_ms), "--api-key", KEY,
    ]  # fmt: skip
    server = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        url = server.stdout.readline().strip()
        busy = server.pid
        with tempfile.TemporaryDirectory(prefix="bench-workers-") as tmp_name:
            tmp = Path(tmp_name)
            data = write_dataset(tmp / "rows.jsonl", args.rows, seed=1)
            single, single_cpu = measured(
                busy, lambda: run_job(live_config(data, url, tmp / "cache-1", args.concurrency))
            )
            workers, workers_cpu = measured(
                busy,
                lambda: run_workers(live_config(data, url, tmp / "cache-w2", args.concurrency), 2),
            )
            started = time.perf_counter()
            with local_cluster(2) as client:
                cluster_s = time.perf_counter() - started
                dask, dask_cpu = measured(
                    busy,
                    lambda: run_on_dask(
                        live_config(data, url, tmp / "cache-dask", args.concurrency), 2, client
                    ),
                )
    finally:
        server.terminate()
        server.wait(10)
    # Live reports differ in measured latencies only: compare the verdicts.
    verdicts = [[(r.id, r.diagnosis) for r in x.report.rows] for x in (single, workers, dask)]
    assert verdicts[0] == verdicts[1] == verdicts[2]
    print(
        f"os.cpu_count() {os.cpu_count()} (the server process shares them); rows {args.rows}; "
        f"service latency {args.latency_ms:g} ms; concurrency {args.concurrency} in total; "
        f"load average after the runs {os.getloadavg()[0]:.2f}"
    )
    print(line("run_job, 1 process", single, None, single_cpu))
    print(line("run_workers, 2", workers, single, workers_cpu))
    print(line("run_on_dask, 2 shards", dask, single, dask_cpu))
    shards = ", ".join(f"{run['wallSeconds']:.2f} s" for run in dask.record["shardRuns"])
    print(f"dask shard tasks' own evaluation time: {shards}")
    print(f"LocalCluster(2) start-up (not timed above): {cluster_s:.2f} s")
    print("verdicts of the three runs: identical (row by row)")


if __name__ == "__main__":
    main()
