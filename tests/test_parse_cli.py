"""``ragbatch parse`` prints what ragbatch will judge: every trace file written by deepeval,
ragas, the Langfuse SDK and the OpenInference instrumentations gives, on stdout, the steps
their expected.json says; ragbatch's own JSONL of rows and traces reads back as the same
lines (issue 46)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from typer.testing import CliRunner

from ragbatch.cli._app import app
from ragbatch.core import Row, Trace
from ragbatch.data import native_line

ROOT = Path(__file__).resolve().parent.parent
CONVERSATIONS = ROOT / "tests/fixtures/real/traces/conversations"
SPANS = ROOT / "tests/fixtures/real/traces/openinference"
TALKS: dict[str, Any] = json.loads((CONVERSATIONS / "expected.json").read_text("utf-8"))["files"]
AGENTS: dict[str, Any] = json.loads((SPANS / "expected.json").read_text("utf-8"))


def parse(*args: str | Path) -> tuple[list[dict[str, Any]], str]:
    """``ragbatch parse ARGS``: its lines as JSON and its stderr (it must succeed)."""
    result = CliRunner().invoke(app, ["parse", *map(str, args)])
    assert result.exit_code == 0, result.stderr
    return [orjson.loads(line) for line in result.stdout_bytes.splitlines()], result.stderr


def fmt(name: str) -> str:
    return name.split("-")[0]


def parsed(name: str, *args: str) -> tuple[list[dict[str, Any]], str]:
    # ragas' agent samples join a search tool's passages as text: it is named (as a user would)
    named = ("--retrieval-tool", "search_docs") if fmt(name) == "ragas" else ()
    return parse(CONVERSATIONS / name, "--format", fmt(name), *named, *args)


def steps_of(line: dict[str, Any], drop: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """A printed trace's steps without span ids (expected.json has none), nor ``drop``'s keys
    of its documents."""
    assert "steps" in line, f"{line['id']} was printed as a row"
    out = []
    for step in line["steps"]:
        step = {k: v for k, v in step.items() if k != "span"}
        if "contexts" in step:
            step["contexts"] = [{k: v for k, v in c.items() if k not in drop}
                                for c in step["contexts"]]  # fmt: skip
        out.append(step)
    return out


def wanted(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """expected.json's steps as printed: a retrieval without a query of its own (deepeval)
    has its turn's question as its query (docs/semantics.md §8)."""
    out, question = [], None
    for step in steps:
        question = step["text"] if step["kind"] == "user" else question
        out.append({**step, "query": question} if step.get("query", "") is None else step)
    return out


def record_id(name: str, record: str) -> str:
    # a CSV record without an id is named by its line (row-<line>, the header is line 1)
    if name.endswith(".csv") and record.startswith("row-"):
        return f"row-{int(record[4:]) + 1}"
    return record


RECORD_FILES = [n for n in TALKS if fmt(n) in ("ragas", "deepeval")]
SESSION_FILES = [n for n in TALKS if fmt(n) == "langfuse" and "sessions" in TALKS[n]]


@pytest.mark.parametrize("name", RECORD_FILES)
def test_ragas_and_deepeval_conversations_print_every_expected_step(name: str) -> None:
    lines, stderr = parsed(name)
    records = TALKS[name]["records"]
    assert [line["id"] for line in lines] == [record_id(name, r["id"]) for r in records]
    for line, record in zip(lines, records, strict=True):
        assert steps_of(line) == wanted(record["steps"]), line["id"]
    steps = sum(len(r["steps"]) for r in records)
    assert stderr.startswith(
        f"parse: {len(records)} items of {CONVERSATIONS / name} (0 rows, {len(records)} "
        f"traces: {steps} steps, "
    )


@pytest.mark.parametrize("name", SESSION_FILES)
def test_langfuse_sessions_print_as_one_trace_of_turns(name: str) -> None:
    lines, _ = parsed(name)
    sessions = {r["id"]: r for r in TALKS[name]["sessions"]}
    alone = {r["id"]: r for r in TALKS[name]["records"] if not r["sessionId"]}
    assert sorted(line["id"] for line in lines) == sorted([*sessions, *alone])
    for line in lines:
        record = sessions.get(line["id"]) or alone[line["id"]]
        assert steps_of(line) == wanted(record["steps"]), line["id"]
        if line["id"] in sessions:
            assert line["sessionId"] == line["id"]
            assert line["metadata"] == {"traces": record["traces"]}


def test_a_langfuse_3x_session_prints_the_turns_it_keeps() -> None:
    name = "langfuse-3.14.6-session-get.jsonl"
    lines, _ = parsed(name)
    records = TALKS[name]["records"]
    assert [(line["id"], steps_of(line)) for line in lines] == [
        (r["id"], r["steps"]) for r in records
    ]


SPAN_FILES = sorted(p.name for p in SPANS.iterdir() if p.name.startswith(("langgraph", "llama",
                    "openai")) and "session" not in p.name)  # fmt: skip


def agent(scenario: str) -> dict[str, Any]:
    return next(t for t in AGENTS["traces"] if t["scenario"] == scenario)


@pytest.mark.parametrize("name", SPAN_FILES)
def test_openinference_traces_print_their_sessions_and_steps(name: str) -> None:
    lines, stderr = parse(SPANS / name, "--format", "openinference")
    by_id = {line["id"]: line for line in lines}
    for session in AGENTS["sessions"]:
        turns = sorted((t for t in AGENTS["traces"] if t["session"] == session["session"]),
                       key=lambda t: t["turn"])  # fmt: skip
        line = by_id.pop(session["session"])
        assert steps_of(line, ("source",)) == [s for turn in turns for s in turn["steps"]]
    # each trace alone: S7 (no retrieval, no tool) is the row it always was
    by_text = {line["steps"][0]["text"] if "steps" in line else line["question"]: line
               for line in by_id.values()}  # fmt: skip
    alone = [t for t in AGENTS["traces"] if t["session"] is None]
    assert sorted(by_text) == sorted(t["match"]["userText"] for t in alone)
    for want in alone:
        line = by_text[want["match"]["userText"]]
        if want["scenario"] == "S7":
            assert "steps" not in line and line["answer"] == want["steps"][1]["text"]
        else:
            assert steps_of(line, ("source",)) == want["steps"], want["scenario"]
    assert stderr.startswith(f"parse: 7 items of {SPANS / name} (1 row, 6 traces: ")


def test_steps_prints_a_single_turn_trace_as_its_steps() -> None:
    name = SPANS / "langgraph-1.2.24-otlp-protobuf.json"
    lines, stderr = parse(name, "--format", "openinference", "--steps")
    s7 = agent("S7")
    (line,) = [x for x in lines if x["steps"][0]["text"] == s7["match"]["userText"]]
    assert steps_of(line) == s7["steps"] and line["traceId"] == line["id"]
    assert stderr.startswith(f"parse: 7 items of {name} (0 rows, 7 traces: ")


# --- ragbatch's own JSONL: rows and traces read back as the same lines ------------------------

TRACE = {
    "id": "t-mock",
    "steps": [
        {"kind": "user", "text": "Where is order A1?"},
        {"kind": "retrieval", "query": "order A1", "contexts": [{"id": "k1", "text": "Ships in 2 days."}],
         "mock": {"retrieval": {"chunkRelevance": {"k1": 0.9}, "sufficiency": 0.8}}},
        {"kind": "tool", "name": "lookup_order", "input": {"id": "A1"}, "output": None},
        {"kind": "answer", "text": "In 2 days.", "expected": {"diagnosis": "PASS"}},
    ],
    "referenceAnswer": "Two days.",
    "expected": {"diagnosis": "PASS", "firstFailingStep": None},
}  # fmt: skip


def test_native_rows_and_traces_read_back_as_the_same_lines(tmp_path: Path) -> None:
    rows = (ROOT / "datasets/rag-fixture.jsonl").read_bytes().splitlines()[:5]
    traces, _ = parsed("deepeval-4.3.1-save-as-jsonl.jsonl")
    dataset = tmp_path / "mixed.jsonl"
    lines = [*rows[:2], json.dumps(TRACE).encode(), *rows[2:], *map(orjson.dumps, traces)]
    dataset.write_bytes(b"\n".join(lines) + b"\n")
    first = CliRunner().invoke(app, ["parse", str(dataset)])
    assert first.exit_code == 0, first.stderr
    again = tmp_path / "again.jsonl"
    again.write_bytes(first.stdout_bytes)
    second = CliRunner().invoke(app, ["parse", str(again)])
    assert second.exit_code == 0, second.stderr
    assert second.stdout_bytes == first.stdout_bytes
    printed = [orjson.loads(line) for line in first.stdout_bytes.splitlines()]
    assert [p["id"] for p in printed] == [orjson.loads(line)["id"] for line in lines]
    # a row's line is the row read from the file; a trace keeps its labels and mock blocks
    assert [native_line(Row.model_validate_json(r)) for r in rows] == [
        orjson.dumps(p) + b"\n" for p in printed if "steps" not in p
    ]
    assert Trace.model_validate(printed[2]) == Trace.model_validate(TRACE)
    assert printed[2]["expected"] == {"diagnosis": "PASS", "firstFailingStep": None}
    assert printed[2]["steps"][1]["mock"]["retrieval"]["chunkRelevance"] == {"k1": 0.9}
    assert printed[6:] == traces
    kinds = [s["kind"] for t in (TRACE, *TALKS["deepeval-4.3.1-save-as-jsonl.jsonl"]["records"])
             for s in t["steps"]]  # fmt: skip
    assert first.stderr == (
        f"parse: 10 items of {dataset} (5 rows, 5 traces: {len(kinds)} steps, "
        f"{kinds.count('retrieval')} retrieval hops, {kinds.count('tool')} tool calls, "
        f"{kinds.count('user')} turns)\n"
    )
