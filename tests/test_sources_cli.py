"""Other tools' exports through ``ragbatch run --format ...`` against the loopback Jev server."""

from __future__ import annotations

import re
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
RESET = "5b8efff798038103d269b633813fc60c"
INVOICE = "0af7651916cd43dd8448eb211c80319c"
WARRANTY = "7f3c9a0e4b2d4c1e9f8a6b5c4d3e2f10"
CHARGING = "1e2d3c4b5a6978877665544332211000"


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
        ("openinference-otlp.json", "openinference", [RESET, INVOICE]),
        ("phoenix-spans.jsonl", "openinference", [WARRANTY, CHARGING]),
        ("langfuse-export.json", "langfuse", ["lf-trace-7d1e", "lf-trace-9a02"]),
        ("langfuse-observations.jsonl", "langfuse", ["lf-trace-b"]),
    ],
)
def test_samples_are_judged(
    jev_server: JevServer, tmp_path: Path, sample: str, fmt: str, expected_ids: list[str]
) -> None:
    data = report(jev_server, tmp_path, SAMPLES / sample, fmt)
    assert [r["id"] for r in rows(data)] == expected_ids
    assert all(r["status"] == "ok" for r in rows(data))
    assert len(jev_server.bodies) >= len(expected_ids)


def test_trace_and_span_ids_reach_the_report(jev_server: JevServer, tmp_path: Path) -> None:
    data = report(jev_server, tmp_path, SAMPLES / "phoenix-spans.jsonl", "openinference")
    first = rows(data)[0]
    assert first["traceId"] == WARRANTY
    assert first["spans"] == {
        "root": "a1b2c3d4e5f60001",
        "retriever": "a1b2c3d4e5f60002",
        "llm": "a1b2c3d4e5f60003",
    }


def test_phoenix_parquet_through_the_cli(jev_server: JevServer, tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    lines = (SAMPLES / "phoenix-spans.jsonl").read_text(encoding="utf-8").splitlines()
    path = tmp_path / "spans.parquet"
    pq.write_table(pa.Table.from_pylist([orjson.loads(line) for line in lines]), path)
    data = report(jev_server, tmp_path, path, "openinference")
    assert [r["id"] for r in rows(data)] == [WARRANTY, CHARGING]


@pytest.mark.parametrize(
    ("fmt", "message"),
    [
        (
            "openinference",
            "expected an OTLP JSON export (resourceSpans[].scopeSpans[].spans[]) or a Phoenix "
            "spans export (columns context.trace_id, context.span_id, attributes.*)",
        ),
        (
            "langfuse",
            "expected a Langfuse export: traces with id, input, output and observations[] "
            "(type SPAN/GENERATION/EVENT, name, input, output), or observations with traceId",
        ),
        (
            "deepeval",
            "missing deepeval field(s) 'input', 'actual_output'; required: input, "
            "actual_output (or actualOutput)",
        ),
        (
            "ragas",
            "missing ragas column(s) 'user_input', 'retrieved_contexts', 'response'; required: "
            "user_input, retrieved_contexts, response (ragas v0.1: question, contexts, answer)",
        ),
    ],
)
def test_a_file_of_another_shape_is_one_error_line(
    jev_server: JevServer, tmp_path: Path, fmt: str, message: str
) -> None:
    path = tmp_path / "export.jsonl"
    path.write_text('\n{"traceId": "t"}\n', encoding="utf-8")
    code, text = run(jev_server, tmp_path, path, fmt)
    assert (code, text) == (2, f"error: {path}:2: {message}\n")
    assert jev_server.bodies == []


def test_readme_source_examples_run(jev_server: JevServer, tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    examples = re.findall(
        r"^ragbatch run (datasets/samples/\S+) --format (\S+) \$JEV$", readme, re.M
    )
    sources = re.findall(r"^#### from (.+)$", readme, re.M)
    assert sources[:4] == ["ragas", "deepeval", "Phoenix/OpenInference", "Langfuse"]
    assert {fmt for _, fmt in examples} == {"ragas", "deepeval", "openinference", "langfuse"}
    for sample, fmt in examples:
        code, text = run(jev_server, tmp_path, ROOT / sample, fmt)
        assert code in (0, 1), (sample, text)
