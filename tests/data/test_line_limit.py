"""A dataset line is read at most RAGBATCH_MAX_LINE_BYTES at a time: a longer one is an error.

A 2 GB line used to be read whole (1.5 GB RSS and growing); these files are just over a small
configured cap, written for real and read by the real readers and the real CLI.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ragbatch.core._errors import ConfigError, DatasetError
from ragbatch.data._base import MAX_LINE_BYTES
from ragbatch.data._formats import open_dataset

ROOT = Path(__file__).resolve().parents[2]
CAP = 2000
TOO_LONG = "line longer than 2,000 bytes (raise the limit with RAGBATCH_MAX_LINE_BYTES)"


def sample(n: int, size: int = 40) -> dict[str, object]:
    return {"user_input": f"q{n}", "retrieved_contexts": ["x" * size], "response": "a"}


def test_the_cli_stops_at_a_line_over_the_cap(tmp_path: Path) -> None:
    path = tmp_path / "long.jsonl"
    first = (ROOT / "datasets" / "rag-fixture.jsonl").read_text().splitlines()[0]
    long_row = {"id": "x", "question": "q" * CAP, "contexts": [], "answer": "a"}
    path.write_text(first + "\n" + json.dumps(long_row) + "\n")
    env = {**os.environ, "RAGBATCH_MAX_LINE_BYTES": str(CAP)}
    done = subprocess.run(
        [sys.executable, "-m", "ragbatch", "run", str(path), "--out", str(tmp_path / "r.json")],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert (done.returncode, done.stderr) == (2, f"error: {path}:2: {TOO_LONG}\n")
    assert "Traceback" not in done.stdout + done.stderr


@pytest.mark.parametrize("fmt", ["jsonl", "ragas", "csv"])
def test_each_line_reader_refuses_a_line_over_the_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fmt: str
) -> None:
    monkeypatch.setenv("RAGBATCH_MAX_LINE_BYTES", str(CAP))
    if fmt == "csv":
        path = tmp_path / "d.csv"
        path.write_text('question,answer,contexts\nq,a,"[]"\nq,' + "a" * (CAP + 1) + ",[]\n")
        line = 3
    else:
        path = tmp_path / "d.jsonl"
        row = {"id": "r", "question": "q", "contexts": [], "answer": "a" * CAP}
        path.write_text(json.dumps({**sample(1), "response": "a" * CAP} if fmt == "ragas" else row))
        line = 1
    with pytest.raises(DatasetError) as caught:
        list(open_dataset(path, fmt))
    assert str(caught.value) == f"{path}:{line}: {TOO_LONG}"


def test_a_line_at_the_cap_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    base = json.dumps({"id": "r", "question": "q", "contexts": [], "answer": ""})
    text = base.replace('"answer": ""', '"answer": "' + "a" * (CAP - len(base)) + '"')
    assert len(text.encode()) == CAP
    path = tmp_path / "d.jsonl"
    path.write_text(text + "\n")
    monkeypatch.setenv("RAGBATCH_MAX_LINE_BYTES", str(CAP))
    assert [len(r.answer) for r in open_dataset(path, "jsonl")] == [CAP - len(base)]


def test_a_one_line_array_longer_than_the_cap_is_read_item_by_item(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # pandas to_json(orient="records") writes the whole dataset on one line: the cap is per item
    path = tmp_path / "d.json"
    path.write_text(json.dumps([sample(n) for n in range(1, 201)]))
    assert path.stat().st_size > 10 * CAP
    monkeypatch.setenv("RAGBATCH_MAX_LINE_BYTES", str(CAP))
    rows = list(open_dataset(path, "ragas"))
    assert [(r.id, r.question) for r in rows] == [(f"row-{n}", f"q{n}") for n in range(1, 201)]


def test_an_array_item_over_the_cap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "d.json"
    path.write_text(json.dumps([sample(1), sample(2, size=CAP)]))
    monkeypatch.setenv("RAGBATCH_MAX_LINE_BYTES", str(CAP))
    with pytest.raises(DatasetError) as caught:
        list(open_dataset(path, "ragas"))
    assert str(caught.value) == f"{path}:1: array item {TOO_LONG.removeprefix('line ')}"


def test_the_cap_setting(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from ragbatch.data._base import max_line_bytes

    monkeypatch.delenv("RAGBATCH_MAX_LINE_BYTES", raising=False)
    assert max_line_bytes() == MAX_LINE_BYTES == 64 << 20
    monkeypatch.setenv("RAGBATCH_MAX_LINE_BYTES", "0")
    with pytest.raises(ConfigError, match="must be a positive number of bytes, got '0'"):
        max_line_bytes()
