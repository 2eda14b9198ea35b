"""Byte damage in ``cache.db`` pages: never a traceback, always a clean outcome (issue 16, 12).

Each seeded trial overwrites random bytes of one random page of a copy of the committed
replay cache, then: an offline replay and a live run (against the loopback server that
recorded the cache) either succeed (damage SQLite never reads, or entries whose checksum
fails: dropped and refetched) or exit 2 with ``cache directory is damaged: … (move it aside
or run `ragbatch cache verify --repair`)``; ``cache verify`` (read-only) flags every damage a
run stumbled on; ``cache verify --repair`` rebuilds the directory, after which the live run
refetches what was dropped and gives the recorded report (wall times aside).
"""

from __future__ import annotations

import random
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from typer.testing import CliRunner, Result

from ragbatch.cli._app import app
from ragbatch.data._jsonl import JsonlReader
from ragbatch.providers.cache._replies import ReplyCache
from ragbatch.providers.cache._store import UnreadableEntry
from ragbatch.providers.cache._verify import verify_cache
from ragbatch.testing import JevServer
from ragbatch.testing.record import KEY, RELEASE, mock_answers

ROOT = Path(__file__).resolve().parents[2]
DATASET = ROOT / "datasets" / "rag-fixture.jsonl"
PRICING = ROOT / "pricing" / "typesafe-2026-12.json"
GOLDEN = ROOT / "reports" / "expected-report-jev.json"
PAGE = 4096
TRIALS = 10
DAMAGED = "cache directory is damaged: "
HINT = " (move it aside or run `ragbatch cache verify --repair`)"


@pytest.fixture(scope="module")
def recorder() -> Iterator[JevServer]:
    """The loopback server as it recorded the committed cache (same answers)."""
    with JevServer(
        api_key=KEY, release=RELEASE, answer_fn=mock_answers(list(JsonlReader(DATASET)))
    ) as server:
        yield server


def damage(source: Path, target: Path, seed: int) -> int:
    """A copy of ``source`` with 1-64 random bytes of one random page overwritten; the page."""
    rng = random.Random(seed)
    shutil.copytree(source, target)
    data = bytearray((target / "cache.db").read_bytes())
    page = rng.randrange(len(data) // PAGE)
    for _ in range(rng.randint(1, 64)):
        data[page * PAGE + rng.randrange(PAGE)] = rng.randrange(256)
    (target / "cache.db").write_bytes(bytes(data))
    return page


def cli(*args: str) -> Result:
    result = CliRunner().invoke(app, list(args), env={"TYPESAFE_API_KEY": KEY})
    # A traceback would be an exception other than the exit itself.
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output and "Traceback" not in result.stderr
    return result


def run(cache: Path, out: Path, *options: str) -> Result:
    return cli(
        "run", str(DATASET), "--provider", "jev", "--model", RELEASE, "--cache-dir", str(cache),
        "--out", str(out), "--pricing", str(PRICING), "--quiet", *options,
    )  # fmt: skip


def assert_clean_outcome(result: Result, cache: Path, ok_codes: set[int]) -> bool:
    """Exit in ``ok_codes``, or 2 with the one-line damage message; True when damaged."""
    if result.exit_code in ok_codes:
        return False
    assert result.exit_code == 2, result.stderr
    line = result.stderr
    assert line.startswith(f"error: {DAMAGED}{cache}: ") and line.endswith(HINT + "\n"), line
    assert line.count("\n") == 1
    return True


def without_latency(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: without_latency(v) for k, v in value.items() if not k.startswith("latency")}
    if isinstance(value, list):
        return [without_latency(v) for v in value]
    return value


@pytest.mark.parametrize("seed", range(TRIALS))
def test_damaged_pages_end_cleanly_and_repair(
    recorder: JevServer, tmp_path: Path, seed: int
) -> None:
    cache = tmp_path / "cache"
    damage(ROOT / "cache", cache, seed)

    offline = run(cache, tmp_path / "offline.json", "--offline", "--base-url", recorder.base_url)
    offline_damaged = assert_clean_outcome(offline, cache, {0, 3})  # 3: a dropped entry
    verified = cli("cache", "verify", str(cache))
    assert verified.exit_code in (0, 2)
    if offline_damaged or offline.exit_code == 3:
        assert verified.exit_code == 2, verified.output

    args = ("--provider", "jev", "--model", RELEASE, "--cache-dir", str(cache))
    estimate = cli("estimate", str(DATASET), *args, "--pricing", str(PRICING))
    assert_clean_outcome(estimate, cache, {0})

    live = run(cache, tmp_path / "live.json", "--base-url", recorder.base_url)
    if assert_clean_outcome(live, cache, {0}):
        assert cli("cache", "verify", str(cache)).exit_code == 2

    repaired = cli("cache", "verify", "--repair", str(cache))
    assert repaired.exit_code == 0, repaired.output
    assert cli("cache", "verify", str(cache)).exit_code == 0
    after = run(cache, tmp_path / "after.json", "--base-url", recorder.base_url)
    assert after.exit_code == 0, after.stderr
    report = orjson.loads((tmp_path / "after.json").read_bytes())
    assert without_latency(report) == without_latency(orjson.loads(GOLDEN.read_bytes()))
    assert verify_cache(cache).ok == 48


def test_verify_counts_and_repair_keeps_the_intact_entries(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    shutil.copytree(ROOT / "cache", cache)
    clean = cli("cache", "verify", str(cache))
    assert clean.exit_code == 0
    assert clean.output == f"{cache}: 48 entries: 48 ok, 0 corrupt, 0 unreadable\n"

    store = ReplyCache(cache)
    keys = sorted(store.keys())
    store.put(keys[0], b"garbage")
    store.close()
    found = cli("cache", "verify", str(cache))
    assert found.exit_code == 2
    assert found.output.startswith(f"{cache}: 48 entries: 47 ok, 1 corrupt, 0 unreadable\n")
    assert f"error: cache directory is damaged: {cache}" in found.stderr

    fixed = cli("cache", "verify", "--repair", str(cache))
    assert fixed.exit_code == 0
    assert fixed.output.endswith(
        f"repaired {cache}: 47 entries kept, 1 dropped (a rerun fetches them again)\n"
    )
    assert sorted(ReplyCache(cache, read_only=True).keys()) == keys[1:]
    assert [p.name for p in tmp_path.iterdir()] == ["cache"]  # nothing left beside it


def test_an_unreadable_row_is_dropped_when_it_can_be(tmp_path: Path) -> None:
    """A read that SQLite fails on, but a delete that works: the entry is dropped, not fatal."""
    cache = tmp_path / "cache"
    shutil.copytree(ROOT / "cache", cache)
    store = ReplyCache(cache)
    key = store.keys()[0]

    def failing_get(*args: Any, **kwargs: Any) -> Any:
        raise sqlite3.DatabaseError("database disk image is malformed")

    store._store.get = failing_get  # type: ignore[union-attr]
    with pytest.raises(UnreadableEntry, match=r"unreadable cache entry .* dropped"):
        store.get(key)
    store.close()
    assert key not in ReplyCache(cache, read_only=True)


@pytest.mark.parametrize("seed", range(TRIALS))
def test_merge_from_or_into_a_damaged_cache_ends_cleanly(tmp_path: Path, seed: int) -> None:
    source, target = tmp_path / "source", tmp_path / "target"
    damage(ROOT / "cache", source, seed)
    damage(ROOT / "cache", target, seed)
    from_damaged = cli("cache", "merge", str(source), "--into", str(tmp_path / "fresh"))
    assert_clean_outcome(from_damaged, source, {0})
    into_damaged = cli("cache", "merge", str(ROOT / "cache"), "--into", str(target))
    assert_clean_outcome(into_damaged, target, {0})
