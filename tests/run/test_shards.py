"""Shards, partials and merge: the merged report is byte-identical to a single run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragbatch.cli._app import app
from ragbatch.run._shards import shard_of
from tests.conftest import JEV_KEY
from tests.run.test_resume import StartServer, wait_for

ROOT = Path(__file__).resolve().parents[2]
PRICING = ROOT / "pricing/typesafe-2026-12.json"
FIXTURES = {
    "rag": (ROOT / "datasets/rag-fixture.jsonl", ()),
    "claims": (ROOT / "datasets/claims-fixture.jsonl", ("--groundedness", "claims")),
}


def cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, [*args])
    return result.exit_code, result.stdout + result.stderr


def run_shards(tmp_path: Path, dataset: Path, n: int, *extra: str) -> list[Path]:
    parts = []
    for k in range(1, n + 1):
        part = tmp_path / f"p{k}.jsonl"
        code, text = cli(
            "run", str(dataset), "--shard", f"{k}/{n}", "--partial-out", str(part),
            "--pricing", str(PRICING), "--quiet", *extra,
        )  # fmt: skip
        assert code == 0, text
        parts.append(part)
    return parts


@pytest.mark.parametrize("name", list(FIXTURES))
def test_merge_equals_single_run_bytes(tmp_path: Path, name: str) -> None:
    dataset, extra = FIXTURES[name]
    single = tmp_path / "single.json"
    assert (
        cli(
            "run", str(dataset), "--out", str(single), "--pricing", str(PRICING), "--quiet", *extra
        )[0]
        == 0
    )
    parts = run_shards(tmp_path, dataset, 3, *extra)
    merged = tmp_path / "merged.json"
    code, text = cli("merge", *map(str, reversed(parts)), "--out", str(merged))
    assert code == 0, text
    assert merged.read_bytes() == single.read_bytes()


def test_shard_partition_is_stable_and_covers_every_row() -> None:
    ids = [f"row-{i}" for i in range(1000)]
    shards = [shard_of(i, 4) for i in ids]
    assert shards == [shard_of(i, 4) for i in reversed(ids)][::-1]
    assert set(shards) == {1, 2, 3, 4}
    assert min(shards.count(k) for k in range(1, 5)) > 200


def test_merge_refuses_missing_shards_and_mismatches(tmp_path: Path) -> None:
    dataset, _ = FIXTURES["rag"]
    parts = run_shards(tmp_path, dataset, 3)
    code, text = cli("merge", str(parts[0]), str(parts[2]), "--out", str(tmp_path / "m.json"))
    assert code == 2 and "missing shard(s) 2/3" in text
    other = tmp_path / "other"
    other.mkdir()
    strict = run_shards(other, dataset, 3, "--pass-threshold", "0.9")
    code, text = cli(
        "merge", str(parts[0]), str(parts[1]), str(strict[2]), "--out", str(tmp_path / "m.json")
    )
    assert code == 2 and "different policies" in text
    code, text = cli("merge", str(parts[0]), str(parts[0]), "--out", str(tmp_path / "m.json"))
    assert code == 2 and "given twice" in text
    code, text = cli("run", str(dataset), "--shard", "4/3", "--partial-out", str(tmp_path / "x"))
    assert code == 2 and "need 1 <= K <= N" in text
    code, text = cli("run", str(dataset), "--shard", "1/3")
    assert code == 2 and "--shard needs --partial-out" in text


def test_workers_report_equals_single_run(tmp_path: Path) -> None:
    dataset, _ = FIXTURES["rag"]
    single, multi = tmp_path / "single.json", tmp_path / "multi.json"
    assert (
        cli("run", str(dataset), "--out", str(single), "--pricing", str(PRICING), "--quiet")[0] == 0
    )
    code, text = cli(
        "run",
        str(dataset),
        "--workers",
        "2",
        "--out",
        str(multi),
        "--pricing",
        str(PRICING),
        "--quiet",
    )
    assert code == 0, text
    assert multi.read_bytes() == single.read_bytes()


def test_killed_shard_resumes_from_the_cache(start_jev_server: StartServer, tmp_path: Path) -> None:
    server = start_jev_server(latency_s=0.05)
    dataset, _ = FIXTURES["rag"]
    cache = tmp_path / "cache"
    env = {**os.environ, "TYPESAFE_API_KEY": JEV_KEY}

    def shard_command(k: int) -> list[str]:
        return [
            sys.executable, "-m", "ragbatch", "run", str(dataset), "--provider", "jev",
            "--base-url", server.base_url, "--model", "jev-1.13.0", "--concurrency", "2",
            "--cache-dir", str(cache), "--shard", f"{k}/2", "--partial-out",
            str(tmp_path / f"p{k}.jsonl"), "--pricing", str(PRICING), "--quiet",
        ]  # fmt: skip

    proc = subprocess.Popen(shard_command(1), cwd=ROOT, env=env, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: server.successful >= 6, proc, limit_s=30)
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert not (tmp_path / "p1.jsonl").exists()  # a killed shard leaves no partial
    for k in (1, 2):
        done = subprocess.run(shard_command(k), cwd=ROOT, env=env, capture_output=True, timeout=60)
        assert done.returncode == 0, done.stderr.decode()
    assert server.successful <= 48 + 2  # rows + calls in flight at the kill
    merged = tmp_path / "merged.json"
    code, text = cli(
        "merge", str(tmp_path / "p1.jsonl"), str(tmp_path / "p2.jsonl"), "--out", str(merged)
    )
    assert code == 0, text
    single = tmp_path / "single.json"
    code, text = cli(
        "run", str(dataset), "--provider", "jev", "--offline", "--model", "jev-1.13.0",
        "--cache-dir", str(cache), "--out", str(single), "--pricing", str(PRICING), "--quiet",
    )  # fmt: skip
    assert code == 0, text
    assert merged.read_bytes() == single.read_bytes()  # replay of the same cache: same bytes


def test_cache_merge_command(tmp_path: Path) -> None:
    import shutil

    source = tmp_path / "worker-1"
    shutil.copytree(ROOT / "cache", source)
    code, text = cli("cache", "merge", str(source), "--into", str(tmp_path / "merged"))
    assert code == 0 and "48 entries copied" in text, text
    code, text = cli("cache", "merge", str(source), "--into", str(tmp_path / "merged"))
    assert code == 0 and "0 entries copied, 48 already there" in text, text
    code, text = cli("cache", "merge", str(tmp_path / "missing"), "--into", str(tmp_path / "m2"))
    assert code == 2 and "does not exist" in text
    empty = tmp_path / "worker-2"
    empty.mkdir()  # a directory, but not a cache: found before the first source is copied
    code, text = cli("cache", "merge", str(source), str(empty), "--into", str(tmp_path / "m3"))
    assert (code, text) == (
        2,
        f"error: {empty} is not a cache directory (no cache.db); check the path\n",
    )
    assert not (tmp_path / "m3").exists()
