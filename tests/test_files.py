"""Atomic output files: a failure at any point leaves the target as it was and no temp file;
a file planted where a temporary file goes is never opened or followed (issue 28, item 12)."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from ragbatch._files import AtomicFile, atomic_file, temporaries_of, write_bytes
from ragbatch.core._errors import ConfigError

ROOT = Path(__file__).resolve().parent.parent
DATASET = ROOT / "datasets" / "rag-fixture.jsonl"
PRICING = ROOT / "pricing" / "typesafe-2026-12.json"
GOLDEN = ROOT / "reports" / "expected-report.json"


def test_write_bytes_replaces_the_target_atomically(tmp_path: Path) -> None:
    target = tmp_path / "deep" / "report.json"
    write_bytes(target, b"one\n")
    write_bytes(target, b"two\n")
    assert target.read_bytes() == b"two\n"
    assert sorted(p.name for p in target.parent.iterdir()) == ["report.json"]


def test_a_directory_appearing_at_the_target_is_a_config_error(tmp_path: Path) -> None:
    target = tmp_path / "report.json"
    failure = pytest.raises(ConfigError, match=r"cannot write .*report.json: ")
    with failure, atomic_file(target) as out:
        out.write(b"{}\n")
        target.mkdir()  # made after any up-front check: the rename fails
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"] and target.is_dir()


def test_an_error_inside_the_block_discards_the_file(tmp_path: Path) -> None:
    target = tmp_path / "rows.jsonl"
    target.write_bytes(b"old\n")
    with pytest.raises(ValueError, match="bad row"), atomic_file(target, "part") as out:
        out.write(b"new\n", flush=True)
        raise ValueError("bad row")
    assert target.read_bytes() == b"old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["rows.jsonl"]


def test_planted_temporary_symlinks_are_not_followed_by_a_real_run(tmp_path: Path) -> None:
    # the names the temporary files had before they were created exclusively
    victims = {}
    for planted in (".report.json.tmp", ".rows.jsonl.part", ".report.md.tmp"):
        victim = tmp_path / f"victim-{planted.strip('.')}"
        victim.write_bytes(b"precious\n")
        (tmp_path / planted).symlink_to(victim)
        victims[planted] = victim
    out, rows, markdown = tmp_path / "report.json", tmp_path / "rows.jsonl", tmp_path / "report.md"
    done = subprocess.run(
        [sys.executable, "-m", "ragbatch", "run", str(DATASET), "--pricing", str(PRICING),
         "--quiet", "--out", str(out), "--rows-out", str(rows), "--markdown", str(markdown)],
        capture_output=True, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    for victim in victims.values():
        assert victim.read_bytes() == b"precious\n"
    for written in (out, rows, markdown):
        assert not written.is_symlink() and written.is_file()
    assert out.read_bytes() == GOLDEN.read_bytes()
    assert len(rows.read_bytes().splitlines()) == 48
    left = {p.name for p in tmp_path.iterdir()} - {"report.json", "rows.jsonl", "report.md"}
    assert left == {*victims, *(v.name for v in victims.values())}  # no temporary file left


def test_a_taken_temporary_name_is_skipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "report.json"
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious\n")
    (tmp_path / ".report.json.aaaa.tmp").symlink_to(victim)
    names = iter(["aaaa", "bbbb"])
    monkeypatch.setattr(secrets, "token_hex", lambda _n: next(names))
    write_bytes(target, b"report\n")
    assert victim.read_bytes() == b"precious\n"
    assert target.read_bytes() == b"report\n" and not target.is_symlink()


def test_temporaries_left_by_a_killed_writer_are_found(tmp_path: Path) -> None:
    target = tmp_path / "rows[1].jsonl"  # glob characters in the name are literal
    out = AtomicFile(target, "part")
    out.write(b"half a row", flush=True)
    assert temporaries_of(target, "part") == [out.tmp]
    assert temporaries_of(tmp_path / "rows.jsonl", "part") == []
    out.discard()
    assert temporaries_of(target, "part") == []
