"""A SIGTERM that lands while ``ragbatch run --workers 2`` forks its workers stops the run.

A signal delivered during a fork used to run the parent's handler inside an at-fork hook,
which swallowed what it raised: the parent had noted the signal, its workers never heard of
it and sent every request. Here a real SIGTERM lands 0-5 ms after the run's first fork, many
times over; every time the run must end with 143 within seconds, having sent no more requests
after the signal than it had in flight.

Each try is a fork of one driver process that imported ragbatch once (a try costs no
interpreter start) and runs the CLI's ``main``; the driver is single-threaded, so the run
forks its workers itself, as ``ragbatch run`` does. The run notes its first fork on the
driver's stdout (an at-fork hook of its own), and the test sends the signal from outside.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from ragbatch.testing import JevServer
from tests.conftest import JEV_KEY

ROOT = Path(__file__).resolve().parents[2]
DATASET = ROOT / "datasets" / "rag-fixture.jsonl"
PRICING = ROOT / "pricing" / "typesafe-2026-12.json"
ROWS = 200
CONCURRENCY = 4  # 2 a worker: at most 4 requests in flight when the signal lands
TRIES = 24
DRIVER = """
import os, sys
import orjson
from ragbatch.cli import main
import ragbatch.run._dispatch, ragbatch.run._workers  # imported once, not in every try

def note_first_fork(seen=[]):
    if not seen:
        seen.append(True)
        os.write(1, b"forked\\n")

for line in sys.stdin:
    args, err = orjson.loads(line)
    pid = os.fork()
    if pid == 0:
        fd = os.open(err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(fd, 2)
        os.register_at_fork(after_in_parent=note_first_fork)
        sys.argv = ["ragbatch", *args]
        code = 0
        try:
            main()
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        os._exit(code)
    os.write(1, f"started {pid}\\n".encode())
    _, status = os.waitpid(pid, 0)
    os.write(1, f"exit {os.waitstatus_to_exitcode(status)}\\n".encode())
"""


def dataset(tmp_path: Path) -> Path:
    rows = DATASET.read_bytes().splitlines()
    path = tmp_path / f"rows{ROWS}.jsonl"
    with path.open("wb") as handle:
        for i in range(ROWS):
            row = orjson.loads(rows[i % len(rows)])
            row["id"] = f"{row['id']}-{i}"
            handle.write(orjson.dumps(row) + b"\n")
    return path


def spin(seconds: float) -> None:
    """Wait ``seconds`` (under 5 ms) precisely: the signal's place in the fork is the point."""
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        pass


@pytest.mark.timeout(90)
def test_sigterm_during_the_workers_fork_stops_the_run_every_time(tmp_path: Path) -> None:
    data = dataset(tmp_path)
    env = {**os.environ, "TYPESAFE_API_KEY": JEV_KEY, "PYTHONPATH": str(ROOT)}
    rng = random.Random(48)
    with JevServer(api_key=JEV_KEY, latency_s=0.05) as server:
        args = [
            "run", str(data), "--provider", "jev", "--base-url", server.base_url,
            "--model", "jev-1.13.0", "--concurrency", str(CONCURRENCY), "--no-cache",
            "--workers", "2", "--out", str(tmp_path / "r.json"), "--pricing", str(PRICING),
            "--quiet",
        ]  # fmt: skip
        driver = subprocess.Popen(
            [sys.executable, "-c", DRIVER], cwd=ROOT, env=env,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        )  # fmt: skip
        assert driver.stdin is not None and driver.stdout is not None
        try:
            for attempt in range(TRIES):
                err = tmp_path / f"err-{attempt}.txt"
                driver.stdin.write(orjson.dumps([args, str(err)]) + b"\n")
                driver.stdin.flush()
                started = driver.stdout.readline().split()
                assert started[0] == b"started", started
                pid = int(started[1])
                assert driver.stdout.readline() == b"forked\n", attempt
                spin(rng.uniform(0.0, 0.005))
                os.kill(pid, signal.SIGTERM)
                sent, signalled = server.requests_total, time.monotonic()
                ended = driver.stdout.readline().split()
                took = time.monotonic() - signalled
                after = server.requests_total - sent
                assert ended == [b"exit", b"143"], (attempt, ended, err.read_text())
                assert err.read_text().splitlines() == [
                    "error: interrupted by SIGTERM: the workers stopped, no report written; "
                    "nothing was cached (no reply cache in this run), so a rerun starts from "
                    "the first row"
                ], attempt
                assert after <= CONCURRENCY, (attempt, after)  # no more than were in flight
                assert took < 5, (attempt, took)  # not after the whole run (or its grace)
                assert not (tmp_path / "r.json").exists()
        finally:
            driver.stdin.close()
            driver.wait(timeout=30)
