"""Kill a live run with SIGKILL halfway, rerun it: the cache resumes it to the same report.

The resumed report must equal (recorded wall times aside) the report of an uninterrupted run
on a fresh cache, and the killed run's finished calls must not be paid for again: across both
runs the server answers at most every row once plus the calls in flight at the kill.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from ragbatch.providers.cache._replies import ReplyCache
from ragbatch.run._job import run_job
from ragbatch.run._options import RunOptions
from ragbatch.testing import JevServer

ROOT = Path(__file__).resolve().parents[2]
DATASET = ROOT / "datasets" / "rag-fixture.jsonl"
PRICING = ROOT / "pricing" / "typesafe-2026-12.json"
MODEL = "jev-1.13.0"
KEY = "test-key"
ROWS = 48
CONCURRENCY = 4

StartServer = Callable[..., JevServer]


def command(server: JevServer, cache_dir: Path, out: Path) -> list[str]:
    """``ragbatch run --provider jev`` on the fixture (the key comes from the environment)."""
    return [
        sys.executable, "-m", "ragbatch", "run", str(DATASET),
        "--provider", "jev", "--base-url", server.base_url, "--model", MODEL,
        "--concurrency", str(CONCURRENCY), "--cache-dir", str(cache_dir),
        "--out", str(out), "--pricing", str(PRICING), "--quiet",
    ]  # fmt: skip


def comparable(report: Any) -> Any:
    """The report without recorded wall times (``latencyMs``, ``latency``, ``latencyP50Ms``)."""
    if isinstance(report, dict):
        return {k: comparable(v) for k, v in report.items() if not k.startswith("latency")}
    if isinstance(report, list):
        return [comparable(v) for v in report]
    return report


def wait_for(predicate: Callable[[], bool], proc: subprocess.Popen[bytes], limit_s: float) -> None:
    """Poll ``predicate`` every few milliseconds while ``proc`` runs."""
    deadline = time.monotonic() + limit_s
    while not predicate():
        assert proc.poll() is None, "the run ended before it could be killed"
        assert time.monotonic() < deadline, "the run made no progress"
        time.sleep(0.002)


def test_killed_run_resumes_to_the_uninterrupted_report(
    start_jev_server: StartServer, tmp_path: Path
) -> None:
    server = start_jev_server(latency_s=0.05)
    cache_dir, out = tmp_path / "cache", tmp_path / "report.json"
    env = {**os.environ, "TYPESAFE_API_KEY": KEY}
    proc = subprocess.Popen(
        command(server, cache_dir, out),
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        wait_for(lambda: server.successful >= 20, proc, limit_s=30)
        proc.send_signal(signal.SIGKILL)
        _, err = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL, err.decode()
    assert not out.exists()

    settled = time.monotonic() + 30
    while server.in_flight and time.monotonic() < settled:  # replies still being written to
        time.sleep(0.005)  # the dead client get counted before the counts are read
    answered_before_kill = server.successful
    cache = ReplyCache(cache_dir)
    cached = len(cache)
    cache.close()
    assert 20 - CONCURRENCY <= cached < ROWS
    assert answered_before_kill - cached <= CONCURRENCY  # only calls in flight were lost

    rerun = subprocess.run(
        command(server, cache_dir, out), cwd=ROOT, env=env, capture_output=True, timeout=60
    )
    assert rerun.returncode == 0, rerun.stderr.decode()
    assert server.successful == answered_before_kill + (ROWS - cached)
    assert server.successful <= ROWS + CONCURRENCY

    fresh_server = start_jev_server()
    fresh = run_job(
        RunOptions.of(
            quiet=True,
            provider="jev",
            base_url=fresh_server.base_url,
            api_key=KEY,
            model=MODEL,
            concurrency=CONCURRENCY,
            cache_dir=tmp_path / "fresh-cache",
            dataset=DATASET,
            out=tmp_path / "fresh.json",
            pricing=PRICING,
        )
    )
    assert fresh_server.successful == ROWS
    resumed = orjson.loads(out.read_bytes())
    uninterrupted = orjson.loads(fresh.report_bytes)
    for report in (resumed, uninterrupted):
        assert all(row["status"] == "ok" for row in report["rows"])
    assert comparable(resumed["rows"]) == comparable(uninterrupted["rows"])
    for name, mode in uninterrupted["modes"].items():
        assert resumed["modes"][name]["classification"] == mode["classification"], name
    assert comparable(resumed) == comparable(uninterrupted)
