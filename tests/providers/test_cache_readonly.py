"""Reading a cache never changes its bytes: an offline replay, ``estimate``, ``cache verify``
and the sources of ``cache merge`` open the directory read-only (issue 16, item 15).

Each test works on a copy of the committed ``cache/`` and compares the sha256 of every file
in it (and the list of files) before and after.
"""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragbatch.cli._app import app
from ragbatch.core._errors import CacheError
from ragbatch.providers.cache._replies import ReplyCache

ROOT = Path(__file__).resolve().parents[2]
DATASET = ROOT / "datasets" / "rag-fixture.jsonl"
PRICING = ROOT / "pricing" / "typesafe-2026-12.json"
MODEL = "jev-1.13.0"


def fingerprint(directory: Path) -> dict[str, str]:
    """sha256 of every file under ``directory``, by relative path."""
    return {
        str(path.relative_to(directory)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(directory.rglob("*"))
        if path.is_file()
    }


@pytest.fixture
def cache_copy(tmp_path: Path) -> Path:
    copy = tmp_path / "cache"
    shutil.copytree(ROOT / "cache", copy)
    return copy


def offline_replay(cache: Path, out: Path) -> int:
    args = [
        "run", str(DATASET), "--provider", "jev", "--model", MODEL, "--offline",
        "--cache-dir", str(cache), "--out", str(out), "--pricing", str(PRICING), "--quiet",
    ]  # fmt: skip
    result = CliRunner().invoke(app, args, env={"TYPESAFE_API_KEY": ""})
    return result.exit_code


def test_offline_replay_and_estimate_leave_every_byte_of_the_cache(
    cache_copy: Path, tmp_path: Path
) -> None:
    before = fingerprint(cache_copy)
    assert list(before) == ["cache.db"]

    assert offline_replay(cache_copy, tmp_path / "r.json") == 0
    expected = (ROOT / "reports" / "expected-report-jev.json").read_bytes()
    assert (tmp_path / "r.json").read_bytes() == expected
    assert fingerprint(cache_copy) == before

    args = [
        "estimate", str(DATASET), "--provider", "jev", "--model", MODEL,
        "--cache-dir", str(cache_copy), "--pricing", str(PRICING),
    ]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "48 calls (48 in the cache)" in result.output
    assert fingerprint(cache_copy) == before

    verified = CliRunner().invoke(app, ["cache", "verify", str(cache_copy)])
    assert verified.exit_code == 0, verified.output
    assert fingerprint(cache_copy) == before


def test_merge_leaves_its_sources_untouched(cache_copy: Path, tmp_path: Path) -> None:
    before = fingerprint(cache_copy)
    into = tmp_path / "merged"
    result = CliRunner().invoke(app, ["cache", "merge", str(cache_copy), "--into", str(into)])
    assert result.exit_code == 0, result.output
    assert "48 entries copied" in result.output
    assert fingerprint(cache_copy) == before


def test_a_left_over_wal_is_read_and_kept(cache_copy: Path, tmp_path: Path) -> None:
    """A writer killed before its checkpoint leaves entries in ``cache.db-wal``: the reader sees
    them and writes neither ``cache.db`` nor the WAL."""
    writer = sqlite3.connect(cache_copy / "cache.db")
    writer.execute("PRAGMA wal_autocheckpoint = 0")
    (key,) = writer.execute("SELECT key FROM Cache LIMIT 1").fetchone()
    writer.execute("DELETE FROM Cache WHERE key = ?", (key,))
    writer.commit()
    killed = tmp_path / "killed"  # the files as a kill -9 of the writer leaves them
    killed.mkdir()
    for name in ("cache.db", "cache.db-wal"):
        shutil.copy(cache_copy / name, killed / name)
    writer.close()
    before = fingerprint(killed)

    reader = ReplyCache(killed, read_only=True)
    assert len(reader) == 47 and reader.get(key) is None  # the delete in the WAL is seen
    keys = reader.keys()
    other = next(k for k in keys if k != key)
    assert reader.get(other) is not None
    reader.close()
    after = fingerprint(killed)
    after.pop("cache.db-shm", None)  # SQLite's shared-memory index may be created
    assert after == before


def test_read_only_refuses_writes_and_reads_a_missing_directory_as_empty(
    cache_copy: Path, tmp_path: Path
) -> None:
    reader = ReplyCache(cache_copy, read_only=True)
    key = reader.keys()[0]
    with pytest.raises(CacheError, match="read-only"):
        reader.put(key, b"x")
    reader.delete(key)  # ignored
    assert reader.get(key) is not None
    reader.close()

    missing = ReplyCache(tmp_path / "nowhere", read_only=True)
    assert len(missing) == 0 and missing.keys() == [] and missing.get(key) is None
    missing.close()
    assert not (tmp_path / "nowhere").exists()
