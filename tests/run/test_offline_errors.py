"""``--offline`` fails as a live run does: a cache path that is a file is one ``error:`` line
(exit 2), and a row over a request size limit is ``request-too-large``, so the replay's report
is the live run's byte for byte (a real loopback server, real files)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import JEV_KEY
from tests.run.test_operations import DATASET, PRICING, cli
from tests.run.test_request_size import HUGE, LONG, dataset
from tests.run.test_resume import StartServer


def run(data: str, cache: Path, out: Path, *extra: str) -> tuple[int, str, str]:
    return cli(
        "run", data, "--provider", "jev", "--model", "jev-1.13.0", "--cache-dir", str(cache),
        "--out", str(out), "--pricing", PRICING, "--quiet", *extra,
        env={"TYPESAFE_API_KEY": JEV_KEY},
    )  # fmt: skip


@pytest.mark.parametrize("workers", ["1", "2"])
def test_offline_with_a_file_as_the_cache_directory_is_one_error_line(
    tmp_path: Path, workers: str
) -> None:
    cache = tmp_path / "cache"
    cache.write_text("not a cache\n")
    out = tmp_path / "r.json"
    code, stdout, stderr = run(DATASET, cache, out, "--offline", "--workers", workers)
    assert code == 2, stdout + stderr
    shard = "shard 1/2: " if workers == "2" else ""  # as a live run names the worker
    expected = f"error: {shard}cannot use cache directory {cache}: it is not a directory\n"
    assert stderr == expected
    assert not out.exists()
    assert cache.read_text() == "not a cache\n"


def test_offline_replay_of_an_oversize_row_is_request_too_large_as_live(
    start_jev_server: StartServer, tmp_path: Path
) -> None:
    server = start_jev_server()
    data, cache = str(dataset(tmp_path)), tmp_path / "cache"
    live, replay = tmp_path / "live.json", tmp_path / "replay.json"
    code, _, err = run(data, cache, live, "--base-url", server.base_url)
    assert code == 3, err
    assert server.successful == 2  # the two oversize rows were not sent
    code, _, err = run(data, cache, replay, "--offline")
    assert code == 3, err
    assert b'"kind":"cache-miss"' not in replay.read_bytes()
    assert replay.read_bytes() == live.read_bytes()
    assert HUGE.encode() in live.read_bytes() and LONG.encode() in live.read_bytes()
