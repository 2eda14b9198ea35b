"""A failed run never destroys an earlier result, ends with one ``error:`` line and its
documented exit code at every concurrency and worker count, and says truthfully what a rerun
will do. Real processes against a real loopback Jev server; a real full file system (tmpfs)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ragbatch.testing import JevServer
from ragbatch.testing.jev_server import Fault
from tests.conftest import JEV_KEY, fill
from tests.run.test_resume import StartServer, wait_for

ROOT = Path(__file__).resolve().parents[2]
DATASET = ROOT / "datasets" / "rag-fixture.jsonl"
PRICING = ROOT / "pricing" / "typesafe-2026-12.json"
ENV = {**os.environ, "TYPESAFE_API_KEY": JEV_KEY}
OUTPUTS = ("r.json", "rows.jsonl", "record.json", "summary.md", "page.html")


def command(server: JevServer, out: Path, cache: Path, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "ragbatch", "run", str(DATASET), "--provider", "jev",
        "--base-url", server.base_url, "--model", "jev-1.13.0", "--cache-dir", str(cache),
        "--pricing", str(PRICING), "--quiet", "--out", str(out / "r.json"),
        "--rows-out", str(out / "rows.jsonl"), "--run-record", str(out / "record.json"),
        "--markdown", str(out / "summary.md"), "--html", str(out / "page.html"), *extra,
    ]  # fmt: skip


def cli(args: list[str]) -> tuple[int, str]:
    done = subprocess.run(args, cwd=ROOT, env=ENV, capture_output=True, timeout=120)
    return done.returncode, done.stderr.decode()


def files_of(folder: Path) -> dict[str, bytes]:
    """Every file in ``folder`` (temporary ones included), by name."""
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


@pytest.fixture(scope="module")
def successful_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """A successful run's outputs, made once for the module (a run with every view costs
    seconds; what a failed run must keep is their bytes)."""
    folder = tmp_path_factory.mktemp("earlier")
    with JevServer(api_key=JEV_KEY) as server:
        code, err = cli(command(server, folder / "out", folder / "cache"))
    assert code == 0, err
    files = files_of(folder / "out")
    assert sorted(files) == sorted(OUTPUTS)
    return files


@pytest.fixture
def earlier(tmp_path: Path, successful_run: dict[str, bytes]) -> dict[str, bytes]:
    """A successful run's outputs in ``tmp_path / "out"``."""
    (tmp_path / "out").mkdir()
    for name, data in successful_run.items():
        (tmp_path / "out" / name).write_bytes(data)
    assert files_of(tmp_path / "out") == successful_run
    return successful_run


def reject_from(n: int) -> Any:
    """The server answers 401 from request ``n`` (counted from 1) on."""
    return lambda index, body: Fault("status", status=401) if index >= n - 1 else None


def assert_one_error_line(err: str, starts: str) -> None:
    assert "Traceback" not in err, err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(starts), err


@pytest.mark.parametrize(
    "scale",
    [("--concurrency", "1"), ("--concurrency", "4"), ("--workers", "2", "--concurrency", "2")],
    ids=["c1", "c4", "w2c2"],
)
def test_a_key_rejected_at_request_10_keeps_every_earlier_output(
    jev_server: JevServer, tmp_path: Path, earlier: dict[str, bytes], scale: tuple[str, ...]
) -> None:
    jev_server.fault_fn = reject_from(10)
    code, err = cli(command(jev_server, tmp_path / "out", tmp_path / "fresh", *scale))
    assert code == 4, err
    assert_one_error_line(err, "error: ")
    assert "401" in err or "rejected" in err
    assert files_of(tmp_path / "out") == earlier  # byte for byte, and no temporary file


@pytest.mark.parametrize("concurrency", ["1", "4"])
def test_an_error_budget_abort_keeps_every_earlier_output(
    jev_server: JevServer, tmp_path: Path, earlier: dict[str, bytes], concurrency: str
) -> None:
    jev_server.fault_fn = lambda index, body: Fault("status", status=500)
    budget = ("--max-error-rate", "0.2", "--error-budget-rows", "4", "--max-retries", "0")
    out, fresh = tmp_path / "out", tmp_path / "fresh"
    code, err = cli(command(jev_server, out, fresh, "--concurrency", concurrency, *budget))
    assert code == 4, err
    assert_one_error_line(err, "error: ")
    assert "--max-error-rate" in err
    assert files_of(out) == earlier


def test_a_full_rows_out_disk_keeps_the_earlier_files_and_ends_in_one_line(
    jev_server: JevServer, tmp_path: Path, small_fs: Path
) -> None:
    out = tmp_path / "out"
    rows = small_fs / "rows.jsonl"
    args = command(jev_server, out, tmp_path / "cache")
    args[args.index("--rows-out") + 1] = str(rows)
    code, err = cli(args)
    assert code == 0, err
    size = rows.stat().st_size
    assert 32 * 1024 < size < 60 * 1024  # one fits in 64 KiB, two do not
    before, old_rows = files_of(out), rows.read_bytes()
    code, err = cli([*args, "--refresh"])  # the same run again: its rows need the space twice
    assert code == 2, err
    assert_one_error_line(err, f"error: cannot write {rows}: No space left on device")
    assert files_of(out) == before
    assert files_of(small_fs) == {"rows.jsonl": old_rows}


def test_ctrl_c_without_a_cache_does_not_promise_a_resume(
    start_jev_server: StartServer, tmp_path: Path
) -> None:
    server = start_jev_server(latency_s=0.2)
    args = command(server, tmp_path / "out", tmp_path / "cache", "--no-cache", "--concurrency", "2")
    proc = subprocess.Popen(args, cwd=ROOT, env=ENV, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: server.requests_total >= 4, proc, limit_s=60)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130
    message = err.decode()
    assert_one_error_line(message, "error: interrupted by SIGINT after ")
    assert "nothing was cached" in message and "in the cache" not in message
    assert not (tmp_path / "cache").exists()
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


@pytest.mark.parametrize("small_fs", ["1m"], indirect=True)
def test_a_cache_disk_filling_up_mid_run_keeps_the_earlier_files(
    start_jev_server: StartServer, tmp_path: Path, small_fs: Path
) -> None:
    server = start_jev_server(latency_s=0.05)
    out = tmp_path / "out"
    code, err = cli(command(server, out, tmp_path / "cache"))
    assert code == 0, err
    before = files_of(out)
    args = command(server, out, small_fs / "cache", "--concurrency", "2")
    proc = subprocess.Popen(args, cwd=ROOT, env=ENV, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: server.requests_total >= 48 + 10, proc, limit_s=60)
        fill(small_fs)
        _, err_bytes = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    message = err_bytes.decode()
    assert proc.returncode == 2, message
    assert_one_error_line(message, "error: ")
    assert "full" in message
    assert server.requests_total < 2 * 48  # it stopped mid-run
    assert files_of(out) == before
