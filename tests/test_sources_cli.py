"""Other tools' exports through ``ragbatch run --format ...`` against the loopback Jev server."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson
import pytest
from typer.testing import CliRunner

from ragbatch.cli._app import app
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
    assert (code, text) == (0, ""), text  # --quiet: nothing on stdout or stderr
    data: dict[str, Any] = orjson.loads((tmp_path / "r.json").read_bytes())
    return data


def rows(data: dict[str, Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = data["rows"]
    return found


@pytest.mark.parametrize(
    ("sample", "fmt", "expected_ids"),
    [
        ("ragas-v01.json", "ragas", ["row-1", "row-2", "row-3"]),
        ("ragas-list.json", "ragas", ["row-1", "row-2"]),
        ("deepeval-sample.json", "deepeval", ["refund-window", "ship-norway", "row-3"]),
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
            "(type SPAN/GENERATION/EVENT, name, input, output), or observations with traceId, sessions with traces, or the OTLP requests the SDK sends",
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


def test_the_guide_source_examples_run(jev_server: JevServer, tmp_path: Path) -> None:
    guide = (ROOT / "docs" / "guides" / "importing-data.md").read_text(encoding="utf-8")
    examples = re.findall(
        r"^ragbatch run (datasets/samples/\S+) --format (\S+) \$JEV$", guide, re.M
    )
    sources = re.findall(r"^## from (.+)$", guide, re.M)
    assert sources[:4] == ["ragas", "deepeval", "Phoenix/OpenInference", "Langfuse"]
    assert {fmt for _, fmt in examples} == {"ragas", "deepeval", "openinference", "langfuse"}
    for sample, fmt in examples:
        data = report(jev_server, tmp_path, ROOT / sample, fmt)
        assert rows(data) and all(r["status"] == "ok" for r in rows(data)), sample


def export(report_path: Path, fmt: str, out: Path) -> list[dict[str, Any]]:
    result = CliRunner().invoke(
        app, ["export", str(report_path), "--format", fmt, "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    return [orjson.loads(line) for line in out.read_bytes().splitlines()]


def root_spans(otlp: Path) -> dict[str, str]:
    """trace id -> the span id of its root (the span without a parent) in an OTLP export."""
    data = orjson.loads(otlp.read_bytes())
    return {
        span["traceId"]: span["spanId"]
        for resource in data["resourceSpans"]
        for scope in resource["scopeSpans"]
        for span in scope["spans"]
        if not span.get("parentSpanId")
    }


def test_openinference_rows_go_back_to_phoenix_on_their_root_spans(
    jev_server: JevServer, tmp_path: Path
) -> None:
    sample = SAMPLES / "openinference-otlp.json"
    data = report(jev_server, tmp_path, sample, "openinference")
    annotations = export(tmp_path / "r.json", "phoenix", tmp_path / "phoenix.jsonl")
    roots = root_spans(sample)
    assert len(annotations) == len(rows(data)) == len(roots) == 2
    for row, note in zip(rows(data), annotations, strict=True):
        assert note["span_id"] == roots[row["traceId"]] == row["spans"]["root"]
        # the cascade's verdict, else (no fallback verdict: no baseline here) Jev's own
        assert note["label"] == row["cascade"].get("diagnosis", row["diagnosis"])


def test_langfuse_traces_go_back_as_scores_on_their_trace_ids(
    jev_server: JevServer, tmp_path: Path
) -> None:
    sample = SAMPLES / "langfuse-export.json"
    data = report(jev_server, tmp_path, sample, "langfuse")
    scores = export(tmp_path / "r.json", "langfuse", tmp_path / "scores.jsonl")
    trace_ids = [trace["id"] for trace in orjson.loads(sample.read_bytes())]
    assert [row["traceId"] for row in rows(data)] == trace_ids
    # two scores a row (diagnosis, pass), each on its row's trace
    assert [score["traceId"] for score in scores] == [t for t in trace_ids for _ in range(2)]


def test_an_import_with_no_fallback_judge_says_so(jev_server: JevServer, tmp_path: Path) -> None:
    args = [
        "run",
        str(SAMPLES / "ragas-sample.jsonl"),
        "--format",
        "ragas",
        "--provider",
        "jev",
        "--base-url",
        jev_server.base_url,
        "--model",
        "jev-1.13.0",
        "--cache-dir",
        str(tmp_path / "cache"),
        "--out",
        str(tmp_path / "r.json"),
        "--pricing",
        str(PRICING),
        "--fail-threshold",
        "0.0001",
        "--pass-threshold",
        "0.9999",
    ]  # fmt: skip  (thresholds no reply reaches: every row goes to the fallback judge)
    result = CliRunner().invoke(app, args, env={"TYPESAFE_API_KEY": KEY})
    lines = result.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("  fallback rate"))
    assert lines[start + 1 : start + 3] == [
        "  no fallback judge was available: every baseline call failed (no-baseline 5), so no "
        "row was judged by the fallback;",
        "    the cascade's accuracy covers only the rows Jev decided, and the rows it routed "
        "to the fallback count as cascade failures",
    ]
