"""Atomic output files: a failure at any point leaves the target as it was and no temp file."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragbatch.core.errors import ConfigError
from ragbatch.data.output import atomic_file, write_bytes


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
