"""RowsWriter: the user's --rows-out reaches the disk a row at a time; a shard's scratch file
is written in buffered blocks (its parent reads it back whole)."""

from __future__ import annotations

from pathlib import Path

from ragbatch.report import RowsWriter
from ragbatch.run import RunOptions
from ragbatch.run._workers import shard_config


def on_disk(path: Path) -> bytes:
    (part,) = RowsWriter.leftovers_of(path)
    return part.read_bytes()


def test_each_row_is_on_disk_once_written(tmp_path: Path) -> None:
    writer = RowsWriter(tmp_path / "rows.jsonl")
    writer.write_line(b'{"id":"a"}')
    assert on_disk(tmp_path / "rows.jsonl") == b'{"id":"a"}\n'  # a crash now keeps it
    writer.close()
    assert (tmp_path / "rows.jsonl").read_bytes() == b'{"id":"a"}\n'


def test_a_scratch_file_is_buffered_and_whole_at_the_end(tmp_path: Path) -> None:
    writer = RowsWriter(tmp_path / "rows.jsonl", flush=False)
    lines = [b'{"id":"%d"}' % i for i in range(3)]
    for line in lines:
        writer.write_line(line)
    assert on_disk(tmp_path / "rows.jsonl") == b""  # no system call a row
    writer.close()
    assert (tmp_path / "rows.jsonl").read_bytes() == b"".join(line + b"\n" for line in lines)


def test_only_a_shard_of_workers_or_dask_writes_a_scratch_file(tmp_path: Path) -> None:
    config = RunOptions.of(dataset=tmp_path / "d.jsonl", rows_out=tmp_path / "rows.jsonl")
    assert config.output.flush_rows  # the file the user named (also under --shard k/N)
    shard = shard_config(config, 1, 4, tmp_path / "p.pkl", tmp_path / "part-rows.jsonl")
    assert not shard.output.flush_rows
