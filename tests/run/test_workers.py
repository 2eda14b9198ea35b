"""``--workers``: per-row results survive the split, and workers never outlive their run."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import psutil
import pytest
from typer.testing import CliRunner

from ragbatch.cli._app import app
from ragbatch.providers.cache._replies import ReplyCache
from ragbatch.report import ReportBuilder
from ragbatch.run import RunOptions
from ragbatch.run import _workers as worker_processes
from ragbatch.run._preflight import preflight
from ragbatch.run._split import part_source, plan_rows
from ragbatch.testing import JevServer
from tests.conftest import JEV_KEY
from tests.run.test_resume import StartServer, wait_for

ROOT = Path(__file__).resolve().parents[2]
DATASET = ROOT / "datasets" / "rag-fixture.jsonl"
PRICING = ROOT / "pricing" / "typesafe-2026-12.json"
ROWS = 48
CONCURRENCY = 4
ENV = {**os.environ, "TYPESAFE_API_KEY": JEV_KEY}


def cli(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(app, [*args], env=env)
    return result.exit_code, result.stdout + result.stderr


@pytest.mark.parametrize("workers", [2, 3])
def test_workers_rows_out_equals_single_process_bytes(
    tmp_path: Path, workers: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(worker_processes, "available_cores", lambda: 8)  # 3 on a 2-core machine
    single, multi = tmp_path / "single.jsonl", tmp_path / "multi.jsonl"
    common = ("run", str(DATASET), "--pricing", str(PRICING), "--quiet")
    code, text = cli(
        *common, "--out", str(tmp_path / "s.json"), "--rows-out", str(single),
        "--html", str(tmp_path / "s.html"), "--markdown", str(tmp_path / "s.md"),
    )  # fmt: skip
    assert code == 0, text
    code, text = cli(
        *common, "--workers", str(workers), "--out", str(tmp_path / "m.json"),
        "--rows-out", str(multi), "--html", str(tmp_path / "m.html"),
        "--markdown", str(tmp_path / "m.md"),
    )  # fmt: skip
    assert code == 0, text
    assert len(multi.read_bytes().splitlines()) == ROWS
    assert multi.read_bytes() == single.read_bytes()
    # the views of the merged report: the HTML shows each row's question and answer, which
    # the workers read (the parent does not parse the rows)
    for view in ("html", "md"):
        assert (tmp_path / f"m.{view}").read_bytes() == (tmp_path / f"s.{view}").read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "m.html", "m.json", "m.md", "multi.jsonl", "s.html", "s.json", "s.md", "single.jsonl"
    ]  # fmt: skip


def test_live_workers_rows_out_equals_the_single_process_replay(
    jev_server: JevServer, tmp_path: Path
) -> None:
    cache, multi, single = tmp_path / "cache", tmp_path / "multi.jsonl", tmp_path / "single.jsonl"
    common = (
        "run", str(DATASET), "--provider", "jev", "--model", "jev-1.13.0", "--cache-dir",
        str(cache), "--pricing", str(PRICING), "--quiet",
    )  # fmt: skip
    code, text = cli(
        *common, "--base-url", jev_server.base_url, "--workers", "2", "--concurrency", "4",
        "--out", str(tmp_path / "m.json"), "--rows-out", str(multi),
        env={"TYPESAFE_API_KEY": JEV_KEY},
    )  # fmt: skip
    assert code == 0, text
    assert jev_server.successful == ROWS
    code, text = cli(
        *common, "--offline", "--out", str(tmp_path / "s.json"), "--rows-out", str(single)
    )
    assert code == 0, text
    assert multi.read_bytes() == single.read_bytes()
    assert (tmp_path / "m.json").read_bytes() == (tmp_path / "s.json").read_bytes()


def live_command(server: JevServer, tmp_path: Path, *extra: str) -> list[str]:
    """A live run of the fixture writing its report and rows under ``tmp_path / "out"``."""
    out = tmp_path / "out"
    return [
        sys.executable, "-m", "ragbatch", "run", str(DATASET), "--provider", "jev",
        "--base-url", server.base_url, "--model", "jev-1.13.0", "--concurrency", str(CONCURRENCY),
        "--cache-dir", str(tmp_path / "cache"), "--out", str(out / "r.json"),
        "--rows-out", str(out / "rows.jsonl"), "--pricing", str(PRICING), "--quiet", *extra,
    ]  # fmt: skip


def start(command: list[str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        command, cwd=ROOT, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )


def cached_entries(tmp_path: Path) -> int:
    cache = ReplyCache(tmp_path / "cache")
    try:
        return len(cache)
    finally:
        cache.close()


def is_running(process: psutil.Process) -> bool:
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def wait_until(predicate: Callable[[], bool], limit_s: float) -> float:
    """Seconds until ``predicate`` held (fails after ``limit_s``)."""
    began = time.monotonic()
    while not predicate():
        assert time.monotonic() - began < limit_s, "timed out"
        time.sleep(0.02)
    return time.monotonic() - began


def assert_resumes(server: JevServer, tmp_path: Path, *extra: str) -> None:
    """After a stopped run: the rerun pays only for what is not in the cache, and finishes."""
    # replies the server was still writing to the stopped client get counted first
    wait_until(lambda: server.in_flight == 0, limit_s=30)
    answered, cached = server.successful, cached_entries(tmp_path)
    assert answered - cached <= CONCURRENCY  # only calls in flight were lost
    rerun = subprocess.run(live_command(server, tmp_path, *extra), cwd=ROOT, env=ENV,
                           capture_output=True, timeout=120)  # fmt: skip
    assert rerun.returncode == 0, rerun.stderr.decode()
    assert server.successful == answered + ROWS - cached
    assert len((tmp_path / "out" / "rows.jsonl").read_bytes().splitlines()) == ROWS


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_stops_the_run_and_a_rerun_resumes(
    start_jev_server: StartServer, tmp_path: Path, sig: signal.Signals, code: int
) -> None:
    server = start_jev_server(latency_s=0.1)
    proc = start(live_command(server, tmp_path))
    try:
        wait_for(lambda: server.successful >= 8, proc, limit_s=60)
        proc.send_signal(sig)
        signalled = time.monotonic()
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert time.monotonic() - signalled < 5
    assert proc.returncode == code, err.decode()
    lines = err.decode().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"error: interrupted by {sig.name} after ")
    assert lines[0].endswith(f"cache ({tmp_path / 'cache'}), rerun the same command to resume")
    assert list((tmp_path / "out").iterdir()) == []  # no report, no rows file, no temp file
    assert server.successful < ROWS
    assert_resumes(server, tmp_path)


def workers_of(proc: subprocess.Popen[bytes]) -> list[psutil.Process]:
    """The parent's processes (multiprocessing's helpers, if any, and the workers), once both
    workers run."""
    kids: list[psutil.Process] = []

    def started() -> bool:
        kids[:] = psutil.Process(proc.pid).children(recursive=True)
        return len(grandchildren(proc, kids)) >= 2

    wait_until(started, limit_s=60)
    return kids


def grandchildren(
    proc: subprocess.Popen[bytes], kids: list[psutil.Process]
) -> list[psutil.Process]:
    """The workers among ``kids``: forked by the run itself (not multiprocessing's resource
    tracker or fork server), or by its fork server."""
    found = []
    for kid in kids:
        with contextlib.suppress(psutil.NoSuchProcess):
            helper = any(h in " ".join(kid.cmdline()) for h in ("resource_tracker", "forkserver"))
            if kid.ppid() != proc.pid or not helper:
                found.append(kid)
    return found


def test_killing_the_workers_parent_stops_its_workers(
    start_jev_server: StartServer, tmp_path: Path
) -> None:
    server = start_jev_server(latency_s=0.2)
    proc = subprocess.Popen(
        live_command(server, tmp_path, "--workers", "2"), cwd=ROOT, env=ENV,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip
    try:
        wait_for(lambda: server.requests_total >= 4, proc, limit_s=60)
        kids = workers_of(proc)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        wait_until(lambda: not any(is_running(kid) for kid in kids), limit_s=5)
        # nobody is left to call the API: no process of the run's session lives on
        wait_until(lambda: not session_processes(proc.pid), limit_s=5)
    finally:
        for kid in [*kids, *session_processes(proc.pid)]:
            if is_running(kid):
                kid.kill()
    assert server.requests_total < ROWS
    assert_resumes(server, tmp_path, "--workers", "2")


def test_sigterm_of_the_workers_parent_stops_them_with_143(
    start_jev_server: StartServer, tmp_path: Path
) -> None:
    server = start_jev_server(latency_s=0.2)
    proc = start(live_command(server, tmp_path, "--workers", "2"))
    kids: list[psutil.Process] = []
    try:
        wait_for(lambda: server.requests_total >= 4, proc, limit_s=60)
        kids = workers_of(proc)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
        wait_until(lambda: not any(is_running(kid) for kid in kids), limit_s=5)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for kid in kids:
            if is_running(kid):
                kid.kill()
    assert proc.returncode == 143, err.decode()
    assert err.decode().splitlines() == [
        "error: interrupted by SIGTERM: the workers stopped, no report written; every finished "
        f"reply is in the cache ({tmp_path / 'cache'}), rerun the same command to resume"
    ]
    assert not (tmp_path / "out" / "r.json").exists()
    assert_resumes(server, tmp_path, "--workers", "2")


def test_a_killed_worker_fails_the_run_with_4_and_leaves_no_files(
    start_jev_server: StartServer, tmp_path: Path
) -> None:
    server = start_jev_server(latency_s=0.2)
    proc = start(live_command(server, tmp_path, "--workers", "2"))
    try:
        wait_for(lambda: server.requests_total >= 4, proc, limit_s=60)
        victim = grandchildren(proc, workers_of(proc))[0]
        victim.kill()
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 4, err.decode()
    lines = err.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: shard "), lines
    assert lines[0].endswith(": the worker was killed by SIGKILL; rerun to resume from the cache")
    assert list((tmp_path / "out").iterdir()) == []  # no report, no rows, no worker leftovers
    assert_resumes(server, tmp_path, "--workers", "2")


def session_processes(sid: int) -> list[psutil.Process]:
    """Every live (not zombie) process of session ``sid``."""
    found = []
    for process in psutil.process_iter():
        with contextlib.suppress(psutil.Error, ProcessLookupError):
            if os.getsid(process.pid) == sid and process.status() != psutil.STATUS_ZOMBIE:
                found.append(process)
    return found


def test_sigterm_early_in_a_workers_run_ends_every_process_of_the_run(
    start_jev_server: StartServer, tmp_path: Path
) -> None:
    # 400 rows, 2 workers, concurrency 4, a 150 ms server; SIGTERM as the first request
    # arrives, while the run is still starting its workers (the other one) and sending
    rows = DATASET.read_bytes().splitlines()
    dataset = tmp_path / "rows400.jsonl"
    with dataset.open("wb") as handle:
        for i in range(400):
            row = orjson.loads(rows[i % len(rows)])
            row["id"] = f"{row['id']}-{i}"
            handle.write(orjson.dumps(row) + b"\n")
    first_request = threading.Event()

    def tell(index: int, body: dict[str, Any]) -> None:
        first_request.set()

    server = start_jev_server(latency_s=0.15, fault_fn=tell)
    command = live_command(server, tmp_path, "--workers", "2")
    command[command.index(str(DATASET))] = str(dataset)
    proc = subprocess.Popen(
        command, cwd=ROOT, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        start_new_session=True,
    )  # fmt: skip
    try:
        assert first_request.wait(60), "no request reached the server"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
        # the parent ended its workers and multiprocessing's helpers before it exited
        wait_until(lambda: not session_processes(proc.pid), limit_s=3)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for left in session_processes(proc.pid):
            left.kill()
    assert proc.returncode == 143, err.decode()


def test_a_part_builds_no_report_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a part's summary is merged by the parent; building (and dropping) a report in each
    # part cost every worker CPU (bench/bench_cores.py)
    plan = plan_rows(DATASET)
    assert plan is not None
    source = part_source(plan, 1, 2, ignore_unknown=False)
    config = RunOptions.of(dataset=DATASET, pricing=PRICING, quiet=True)
    part = worker_processes.shard_config(config, 1, 2, tmp_path / "part.pkl")
    part = part.replace(source=source, max_report_rows=0)

    def refused(self: ReportBuilder, dataset_sha256: str | None = None) -> None:
        raise AssertionError("a part built a report")

    monkeypatch.setattr(ReportBuilder, "report", refused)
    done = worker_processes.run_shard_task(preflight(part))
    assert done["rows"] == ROWS // 2, done
    assert (tmp_path / "part.pkl").exists()
