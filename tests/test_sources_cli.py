"""Other tools' exports through ``ragbatch run --format ...`` against the loopback Jev server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from typer.testing import CliRunner

from ragbatch.cli.app import app
from ragbatch.testing import JevServer

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "datasets/samples"
PRICING = ROOT / "pricing/typesafe-2026-12.json"
KEY = "test-key"


def run(server: JevServer, tmp_path: Path, dataset: Path, fmt: str) -> tuple[int, str]:
    args = [
        "run", str(dataset),
        "--format", fmt,
        "--provider", "jev",
        "--base-url", server.base_url,
        "--model", "jev-1.13.0",
        "--cache-dir", str(tmp_path / "cache"),
        "--out", str(tmp_path / "r.json"),
        "--pricing", str(PRICING),
        "--quiet",
    ]  # fmt: skip
    result = CliRunner().invoke(app, args, env={"TYPESAFE_API_KEY": KEY})
    return result.exit_code, result.stdout + result.stderr


def report(server: JevServer, tmp_path: Path, dataset: Path, fmt: str) -> dict[str, Any]:
    code, text = run(server, tmp_path, dataset, fmt)
    assert code in (0, 1), text  # 1: the gate failed, the report is written
    data: dict[str, Any] = orjson.loads((tmp_path / "r.json").read_bytes())
    return data


def rows(data: dict[str, Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = data["rows"]
    return found


@pytest.mark.parametrize(
    ("sample", "fmt", "expected_ids"),
    [
        ("ragas-v01.json", "ragas", ["row-2", "row-11", "row-19"]),
        ("ragas-list.json", "ragas", ["row-2", "row-13"]),
        ("deepeval-sample.json", "deepeval", ["refund-window", "ship-norway", "row-23"]),
        ("deepeval-sample.csv", "deepeval", ["refund-window", "ship-norway"]),
    ],
)
def test_samples_are_judged(
    jev_server: JevServer, tmp_path: Path, sample: str, fmt: str, expected_ids: list[str]
) -> None:
    data = report(jev_server, tmp_path, SAMPLES / sample, fmt)
    assert [r["id"] for r in rows(data)] == expected_ids
    assert all(r["status"] == "ok" for r in rows(data))
    assert len(jev_server.bodies) >= len(expected_ids)
