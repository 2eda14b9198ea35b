"""A bad merge source leaves the target untouched, and a repair killed between its renames is
finished by whoever opens the cache next (issue 28, items 2 and 3). Real processes: the
``ragbatch`` CLI in a subprocess, and a repair SIGKILLed right after its first rename."""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from ragbatch.providers.cache._merge import merge_caches
from ragbatch.providers.cache._replies import ReplyCache
from ragbatch.providers.cache._swap import journal_of
from ragbatch.providers.cache._verify import repair_cache, verify_cache

ROOT = Path(__file__).resolve().parents[2]
DATASET = ROOT / "datasets" / "rag-fixture.jsonl"
PRICING = ROOT / "pricing" / "typesafe-2026-12.json"
GOLDEN = ROOT / "reports" / "expected-report-jev.json"
MODEL = "jev-1.13.0"
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "TYPESAFE_API_KEY": ""}


def ragbatch(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ragbatch", *map(str, args)],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=120,
    )


def fingerprint(directory: Path) -> dict[str, str]:
    return {
        str(path.relative_to(directory)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(directory.rglob("*"))
        if path.is_file()
    }


def with_a_corrupt_entry(directory: Path) -> Path:
    """A copy of the committed cache plus one entry that fails its checksum (49 entries)."""
    shutil.copytree(ROOT / "cache", directory)
    cache = ReplyCache(directory)
    cache.put("f" * 64, b'{"format": 1}\nnot what the header promised')
    cache.close()
    return directory


def test_merge_good_and_damaged_into_new_leaves_no_target(tmp_path: Path) -> None:
    good = tmp_path / "good"
    shutil.copytree(ROOT / "cache", good)
    bad = with_a_corrupt_entry(tmp_path / "damaged")
    done = ragbatch("cache", "merge", good, bad, "--into", tmp_path / "new")
    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        f"error: cache directory is damaged: {bad}: 49 entries: 48 ok, 1 corrupt, 0 unreadable "
        "(move it aside or run `ragbatch cache verify --repair`)\n"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["damaged", "good"]


def test_merge_with_a_damaged_source_leaves_an_existing_target_byte_for_byte(
    tmp_path: Path,
) -> None:
    target = tmp_path / "target"
    shutil.copytree(ROOT / "cache", target)
    before = fingerprint(target)
    bad = with_a_corrupt_entry(tmp_path / "damaged")
    fresh = tmp_path / "fresh"
    ReplyCache(fresh).close()  # an empty cache: everything in bad would be new
    done = ragbatch("cache", "merge", bad, "--into", fresh)
    assert done.returncode == 2 and "cache directory is damaged" in done.stderr
    assert len(ReplyCache(fresh, read_only=True)) == 0
    done = ragbatch("cache", "merge", bad, "--into", target)
    assert done.returncode == 2
    assert fingerprint(target) == before


def crash_state(cache: Path, step: str) -> None:
    """The directory as a repair killed at ``step`` leaves it (journal written by then)."""
    staging = cache.with_name(f".{cache.name}.repair-4242")
    old = cache.with_name(f".{cache.name}.damaged-4242")
    shutil.copytree(ROOT / "cache", staging)  # what the repair built: the intact entries
    journal_of(cache).write_bytes(orjson.dumps({"staging": staging.name, "old": old.name}))
    if step in ("first-rename", "second-rename"):
        os.replace(cache, old)
    if step == "second-rename":
        os.replace(staging, cache)


@pytest.mark.parametrize("step", ["journal", "first-rename", "second-rename"])
@pytest.mark.parametrize("opener", ["verify", "offline-run"])
def test_an_interrupted_repair_is_finished_by_the_next_opener(
    tmp_path: Path, step: str, opener: str
) -> None:
    cache = with_a_corrupt_entry(tmp_path / "cache")
    crash_state(cache, step)
    if opener == "verify":
        done = ragbatch("cache", "verify", cache)
        assert (done.returncode, done.stdout) == (
            0,
            f"{cache}: 48 entries: 48 ok, 0 corrupt, 0 unreadable\n",
        ), done.stderr
    else:
        out = tmp_path / "report.json"
        done = ragbatch(
            "run", DATASET, "--provider", "jev", "--model", MODEL, "--offline", "--cache-dir",
            cache, "--out", out, "--pricing", PRICING, "--quiet",
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert out.read_bytes() == GOLDEN.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "report.json") == ["cache"]


KILLED_REPAIR = """
import os, signal, sys
from pathlib import Path

cache = Path(sys.argv[1])
real_replace = os.replace


def replace(src, dst):
    real_replace(src, dst)
    if Path(src) == cache:  # the cache has just been moved aside: die before the next rename
        os.kill(os.getpid(), signal.SIGKILL)


os.replace = replace
from ragbatch.providers.cache._verify import repair_cache

repair_cache(cache)
"""


def test_a_repair_killed_between_its_renames_is_finished_by_cache_verify(
    tmp_path: Path,
) -> None:
    cache = with_a_corrupt_entry(tmp_path / "cache")
    killed = subprocess.run(
        [sys.executable, "-c", KILLED_REPAIR, str(cache)], env=ENV, capture_output=True
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert not cache.exists()  # the moment the issue describes: no cache directory
    done = ragbatch("cache", "verify", cache)
    assert (done.returncode, done.stdout) == (
        0,
        f"{cache}: 48 entries: 48 ok, 0 corrupt, 0 unreadable\n",
    ), done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache"]


def test_repair_leaves_no_journal_and_no_hidden_folder(tmp_path: Path) -> None:
    cache = with_a_corrupt_entry(tmp_path / "cache")
    result = repair_cache(cache)
    assert (result.kept, result.dropped) == (48, 1)
    assert not verify_cache(cache).is_damaged
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache"]


def test_a_merge_into_a_half_swapped_target_finishes_the_swap_first(tmp_path: Path) -> None:
    cache = with_a_corrupt_entry(tmp_path / "cache")
    crash_state(cache, "first-rename")
    source = tmp_path / "src"
    shutil.copytree(ROOT / "cache", source)
    stats = merge_caches([source], cache)
    assert (stats.copied, stats.already_present) == (0, 48)  # the repaired store, not a new one
    assert verify_cache(cache).ok == 48
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache", "src"]
