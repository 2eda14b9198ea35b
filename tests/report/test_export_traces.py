"""``ragbatch export`` of multi-step traces (docs/semantics.md §8): the trace's verdict on its
root span (Langfuse: on the trace, or the session), and its first failing step's (an uncertain
trace's deciding step's) on that step's own span or observation, end to end from the real
LangGraph and Langfuse exports; steps without span ids fall back, and say so."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import jsonschema
import orjson
import pytest
from typer.testing import CliRunner

from ragbatch.cli._app import app
from ragbatch.report._export import export_rows, score_id
from ragbatch.report._models import report_json
from ragbatch.run._job import run_job
from ragbatch.run._options import RunOptions
from tests.data.test_trace_span_ids import span_ids

ROOT = Path(__file__).resolve().parents[2]
REAL = ROOT / "tests/fixtures/real"
LANGGRAPH = REAL / "traces/openinference/langgraph-1.2.24-otlp-protobuf.json"
LANGFUSE = REAL / "traces/conversations/langfuse-3.14.6-trace-get.jsonl"
PRICING = str(ROOT / "pricing/typesafe-2026-12.json")


def cli(*args: str) -> Any:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result


def lines(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def phoenix_schema() -> dict[str, Any]:
    excerpt = json.loads((REAL / "phoenix-20.26.1-openapi-span-annotations.json").read_text())
    return {**excerpt["requestBody"], "components": excerpt["components"]}


def otlp_spans(path: Path) -> dict[str, dict[str, Any]]:
    """The file's spans by hex id, with their parent and OpenInference span kind."""
    spans = {}
    for resource in json.loads(path.read_text())["resourceSpans"]:
        for scope in resource["scopeSpans"]:
            for span in scope["spans"]:
                attrs = {a["key"]: a["value"].get("stringValue") for a in span["attributes"]}
                parent = span.get("parentSpanId")
                spans[base64.b64decode(span["spanId"]).hex()] = {
                    "parent": base64.b64decode(parent).hex() if parent else None,
                    "kind": attrs.get("openinference.span.kind"),
                }
    return spans


@pytest.fixture(scope="module")
def langgraph(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[dict[str, Any]], Path]:
    """parse → run (the offline mock answers each step by word overlap) → the report rows."""
    tmp = tmp_path_factory.mktemp("langgraph")
    parsed, report = tmp / "traces.jsonl", tmp / "report.json"
    cli("parse", str(LANGGRAPH), "--format", "openinference", "--out", str(parsed))
    cli("run", str(parsed), "--out", str(report), "--pricing", PRICING, "--quiet",
        "--baseline", "lexical")  # fmt: skip
    return orjson.loads(report.read_bytes())["rows"], report


def test_phoenix_annotations_land_on_the_failing_step_s_span_in_the_file(
    langgraph: tuple[list[dict[str, Any]], Path], tmp_path: Path
) -> None:
    rows, report = langgraph
    out = tmp_path / "phoenix.jsonl"
    cli("export", str(report), "--format", "phoenix", "--out", str(out))
    records = lines(out)
    jsonschema.validate({"data": records}, phoenix_schema())  # POST /v1/span_annotations
    spans = otlp_spans(LANGGRAPH)
    failing = [r for r in rows if r.get("firstFailingStep") is not None]
    assert len(failing) >= 2  # the mock's verdicts put a failure in several traces
    for row in failing:
        step = row["steps"][row["firstFailingStep"]]
        (on_step,) = [a for a in records if a["name"] == "ragbatch.step"
                      and a["metadata"]["row_id"] == row["id"]]  # fmt: skip
        assert on_step["span_id"] == step["span"] and step["span"] in spans
        # the span is the step's own kind in the file: a retrieval's tool or retriever span,
        # an answer's LLM span
        kinds = {"retrieval": {"TOOL", "RETRIEVER"}, "answer": {"LLM"}}[step["kind"]]
        assert spans[step["span"]]["kind"] in kinds
        assert on_step["label"] == step["diagnosis"] and on_step["score"] == 0.0
        assert on_step["explanation"].startswith(f"step {step['index']} (")
        assert on_step["metadata"]["step"] == step["index"]
    for row in (r for r in rows if "steps" in r):
        (verdict,) = [a for a in records if a["name"] == "ragbatch"
                      and a["metadata"]["row_id"] == row["id"]]  # fmt: skip
        root = (row.get("spans") or {}).get("root")
        if root is not None:  # one trace: its root span, the one without a parent
            assert verdict["span_id"] == root and spans[root]["parent"] is None
        else:  # a session: the root span of the turn its verdict is about
            turn = row["steps"][row["decidingStep"]]["turn"]
            user = next(s for s in row["steps"] if s["kind"] == "user" and s["turn"] == turn)
            assert verdict["span_id"] == user["span"] and spans[user["span"]]["parent"] is None


def test_langfuse_step_scores_name_the_observation_and_its_trace(tmp_path: Path) -> None:
    parsed, report, out = tmp_path / "t.jsonl", tmp_path / "r.json", tmp_path / "l.jsonl"
    cli("parse", str(LANGFUSE), "--format", "langfuse", "--out", str(parsed))
    cli("run", str(parsed), "--out", str(report), "--pricing", PRICING, "--quiet",
        "--baseline", "lexical")  # fmt: skip
    cli("export", str(report), "--format", "langfuse", "--out", str(out))
    rows = orjson.loads(report.read_bytes())["rows"]
    scores = lines(out)
    trace_of: dict[str, str] = {}  # observation id -> its trace id, as the file has them
    for line in LANGFUSE.read_text().splitlines():
        trace = json.loads(line)
        trace_of |= {o["id"]: trace["id"] for o in trace["observations"]}
    assert set(trace_of) == span_ids(LANGFUSE)
    steps = [s for s in scores if s["name"] == "ragbatch.step.diagnosis"]
    assert steps
    for found in steps:
        assert trace_of[found["observationId"]] == found["traceId"]  # the turn's own trace
    for row in rows:
        mine = [s for s in scores if s["name"] in ("ragbatch.diagnosis", "ragbatch.pass")
                and (s.get("traceId"), s.get("sessionId")) in {(row.get("traceId"), None),
                                                                (None, row["id"])}]  # fmt: skip
        assert len(mine) == 2
        if row.get("traceId"):  # the trace itself, not one of its observations
            assert all(s["observationId"] is None for s in mine)
        else:  # a session read from its traces: the session
            assert all(s["sessionId"] == row["id"] and "traceId" not in s for s in mine)
            assert row["metadata"]["traces"]
    assert len({s["id"] for s in scores}) == len(scores)


def trace_report(tmp_path: Path, trace: dict[str, Any]) -> dict[str, Any]:
    data = tmp_path / "t.jsonl"
    data.write_bytes(orjson.dumps(trace) + b"\n")
    config = RunOptions.of(quiet=True, dataset=data, out=None, pricing=Path(PRICING))
    row: dict[str, Any] = report_json(run_job(config).report)["rows"][0]
    return row


HOP_MISS = {"retrieval": {"chunkRelevance": {"d1": 0.05}, "sufficiency": 0.1, "conflict": 0.05}}
GOOD = {"generation": {"relevance": 0.95, "groundedness": 0.92, "contradiction": 0.04}}


def miss(span: str | None) -> dict[str, Any]:
    hop: dict[str, Any] = {"kind": "retrieval", "query": "q", "mock": HOP_MISS,
                           "contexts": [{"id": "d1", "text": "Unrelated."}]}  # fmt: skip
    return hop | ({"span": span} if span else {})


def test_a_step_without_a_span_id_falls_back_and_says_so(tmp_path: Path) -> None:
    row = trace_report(tmp_path, {
        "id": "t1", "traceId": "trace-1", "spans": {"root": "root-1"},
        "steps": [{"kind": "user", "text": "Q?", "span": "root-1"}, miss(None),
                  {"kind": "answer", "text": "A.", "span": "llm-1", "mock": GOOD}],
    })  # fmt: skip
    assert row["firstFailingStep"] == 1
    verdict, step = export_rows([row], "phoenix").records
    assert verdict["span_id"] == step["span_id"] == "root-1"
    assert (verdict["name"], step["name"]) == ("ragbatch", "ragbatch.step")
    assert verdict["explanation"] == (
        "Jev: RETRIEVAL_MISS (confidence 0.95, route auto); first failing step 1 (retrieval hop)"
    )
    assert step["explanation"] == (
        "step 1 (retrieval hop): RETRIEVAL_MISS (confidence 0.95), the trace's first failing "
        "step (the step has no span id: on the trace's own span)"
    )
    assert step["metadata"]["retrieval"]["chunkRelevance"] == {"d1": 0.05}
    diagnosis, passed, on_step = export_rows([row], "langfuse").records
    assert (diagnosis["traceId"], diagnosis["observationId"]) == ("trace-1", None)
    assert on_step["traceId"] == "trace-1" and on_step["observationId"] is None
    assert on_step["comment"].endswith("(the step has no span id: on its trace)")
    assert on_step["id"] == score_id("trace-1", None, "ragbatch.step.diagnosis")
    assert len({diagnosis["id"], passed["id"], on_step["id"]}) == 3


def test_a_passing_trace_has_only_its_verdict_and_a_bare_trace_is_skipped(
    tmp_path: Path,
) -> None:
    steps = [{"kind": "user", "text": "Q?", "span": "u"},
             {"kind": "answer", "text": "A.", "span": "a", "mock": GOOD}]  # fmt: skip
    row = trace_report(tmp_path, {"id": "t2", "traceId": "tr", "steps": steps})
    assert row["diagnosis"] == "RETRIEVAL_MISS"  # an answer with no retrieval: rule 2
    found = export_rows([row], "phoenix").records
    assert [(a["name"], a["span_id"]) for a in found] == [("ragbatch", "u"), ("ragbatch.step", "a")]
    assert found[1]["explanation"].endswith("; no retrieval before it in its turn")
    hop = {"kind": "retrieval", "query": "q", "contexts": [{"id": "d1", "text": "Q is A."}],
           "span": "h", "mock": {"retrieval": {"chunkRelevance": {"d1": 0.95},
                                               "sufficiency": 0.9, "conflict": 0.05}}}  # fmt: skip
    row = trace_report(tmp_path, {"id": "t3", "traceId": "tr", "steps": [steps[0], hop, steps[1]]})
    assert row["diagnosis"] == "PASS"
    (only,) = export_rows([row], "phoenix").records
    assert only["span_id"] == "u" and only["explanation"].endswith(
        "; no step failed (1 hops, 1 turns)"
    )
    bare = {
        **row,
        "spans": None,
        "traceId": None,
        "steps": [{**s, "span": None} for s in row["steps"]],
    }
    assert export_rows([bare], "phoenix").skipped == [
        ("t3", "no span id (root or LLM span) on the row")
    ]
    assert export_rows([bare], "langfuse").skipped == [("t3", "no traceId on the row")]
