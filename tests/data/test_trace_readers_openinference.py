"""Agent traces written by LangGraph, LlamaIndex and the OpenAI Agents SDK under their
OpenInference instrumentations (and read back from Phoenix) give the steps expected.json
says, every step of every trace of every file; a session's traces are one trace of turns."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ragbatch.core import DatasetError, RetrievalStep, Row, Trace
from ragbatch.data._formats import open_items
from ragbatch.data._trace_openinference import OpenInferenceTraceReader

ROOT = Path(__file__).resolve().parents[2]
HERE = ROOT / "tests/fixtures/real/traces/openinference"
EXPECTED = json.loads((HERE / "expected.json").read_text(encoding="utf-8"))
SOURCES = {doc["id"]: doc["source"] for doc in EXPECTED["knowledgeBase"]}
FILES = [
    "langgraph-1.2.24-otlp-protobuf.json",
    "langgraph-1.2.24-phoenix-20.26.1-get-spans.json",
    "langgraph-1.2.24-phoenix-20.26.1-spans.jsonl",
    "langgraph-1.2.24-phoenix-20.26.1-spans.parquet",
    "llamaindex-0.14.25-otlp-protobuf.json",
    "openai-agents-0.24.0-retriever-kind-otlp-protobuf.json",
    "openai-agents-0.24.0-tools-otlp-protobuf.json",
]


def test_every_trace_file_is_checked() -> None:
    on_disk = {p.name for p in HERE.iterdir() if p.suffix in (".json", ".jsonl", ".parquet")}
    # expected.json, MANIFEST.json and Phoenix's session listings are not trace files
    assert on_disk - set(FILES) == {
        "expected.json",
        "MANIFEST.json",
        "langgraph-1.2.24-phoenix-20.26.1-sessions.json",
        "langgraph-1.2.24-phoenix-20.26.1-session-turns.json",
    }


def steps_of(trace: Trace) -> list[dict[str, Any]]:
    """The steps without span ids and sources: expected.json leaves a document's source out
    ("scores and sources are not part of the step"), while ragbatch keeps the source a
    format records, as its single-turn readers do; the sources are checked on their own."""
    out = []
    for step in trace.steps:
        data = step.model_dump(mode="json", by_alias=True, exclude_none=True)
        data.pop("span", None)
        for context in data.get("contexts", []):
            context.pop("source", None)
        out.append(data)
    return out


def check_sources(trace: Trace) -> None:
    for step in trace.steps:
        if isinstance(step, RetrievalStep):
            assert [c.source for c in step.contexts] == [SOURCES[c.id] for c in step.contexts]


@pytest.mark.parametrize("name", FILES)
def test_each_trace_gives_its_expected_steps(name: str) -> None:
    reader = OpenInferenceTraceReader(HERE / name, steps=True, sessions=False)
    traces = list(reader.items())
    assert len(traces) == len(EXPECTED["traces"]) == 10
    found = {}
    for trace in traces:
        assert isinstance(trace, Trace) and trace.id == trace.trace_id
        found[trace.steps[0].model_dump()["text"]] = trace
    for want in EXPECTED["traces"]:
        trace = found[want["match"]["userText"]]
        assert steps_of(trace) == want["steps"], want["scenario"]
        assert trace.session_id == want["session"]
        check_sources(trace)
        # every step names the span it came from
        assert all(step.span for step in trace.steps[1:])


@pytest.mark.parametrize("name", FILES)
def test_sessions_are_one_trace_of_turns_and_plain_traces_stay_rows(name: str) -> None:
    items = list(open_items(HERE / name, "openinference").items())
    by_id = {item.id: item for item in items}
    for session in EXPECTED["sessions"]:
        turns = [t for t in EXPECTED["traces"] if t["session"] == session["session"]]
        turns.sort(key=lambda t: t["turn"])
        trace = by_id[session["session"]]
        assert isinstance(trace, Trace)
        assert steps_of(trace) == [step for turn in turns for step in turn["steps"]]
        assert trace.metadata is not None and len(trace.metadata["traces"]) == len(turns)
    # S7 (one turn, no retrieval, no tool) is the row the single-turn reader gives
    rows = [item for item in items if isinstance(item, Row)]
    (s7,) = [t for t in EXPECTED["traces"] if t["scenario"] == "S7"]
    assert [(r.question, r.answer, r.contexts) for r in rows] == [
        (s7["steps"][0]["text"], s7["steps"][1]["text"], [])
    ]
    assert len(items) == 7  # S1, S2, S3, S6 and S7 alone, S4 and S5 as sessions


def test_a_retrieval_tool_is_one_step_never_also_a_tool() -> None:
    # LangGraph: search_kb (TOOL) holds VectorStoreRetriever (RETRIEVER); the tool's own
    # output is a ToolMessage of joined text
    name = "langgraph-1.2.24-otlp-protobuf.json"
    reader = OpenInferenceTraceReader(HERE / name, steps=True, retrieval_tools={"search_kb"})
    s6 = next(i for i in reader.items() if isinstance(i, Trace) and len(i.steps) == 5)
    assert [s.kind for s in s6.steps] == ["user", "retrieval", "tool", "retrieval", "answer"]


def test_flatten_gives_the_single_turn_rows() -> None:
    name = "openai-agents-0.24.0-retriever-kind-otlp-protobuf.json"
    rows = list(open_items(HERE / name, "openinference", flatten=True).items())
    assert len(rows) == 10 and all(isinstance(r, Row) for r in rows)
    # the old view: the first retriever's input and documents, the last LLM's answer
    s1 = next(r for r in rows if isinstance(r, Row) and r.answer.startswith("Aurora kettles"))
    assert s1.question == "Aurora kettle shipping warehouse"
    assert [c.id for c in s1.contexts] == ["kb-01", "kb-03"]


def otlp(*spans: dict[str, Any]) -> str:
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": list(spans)}]}]})


def span(span_id: str, kind: str, start: int | None, parent: str | None = "0" * 16,
         **attrs: Any) -> dict[str, Any]:  # fmt: skip
    attributes = [{"key": "openinference.span.kind", "value": {"stringValue": kind}}]
    attributes += [{"key": k.replace("_", "."), "value": {"stringValue": v}}
                   for k, v in attrs.items()]  # fmt: skip
    out = {"traceId": "ab" * 16, "spanId": span_id * 16, "name": kind.lower(),
           "attributes": attributes}  # fmt: skip
    if parent:
        out["parentSpanId"] = parent
    if start is not None:
        out["startTimeUnixNano"] = str(start)
    return out


def test_unorderable_steps_and_missing_documents_in_otlp(tmp_path: Path) -> None:
    root = span("0", "CHAIN", 1, None, input_value="q?")
    hop = {"retrieval_documents_0_document_content": "d"}
    answer = span("9", "LLM", 9, **{"llm_output_messages_0_message_role": "assistant",
                                    "llm_output_messages_0_message_content": "a"})  # fmt: skip

    def fails(*spans: dict[str, Any]) -> str:
        path = tmp_path / "t.json"
        path.write_text(otlp(*spans), encoding="utf-8")
        with pytest.raises(DatasetError) as err:
            list(open_items(path, "openinference").items())
        return str(err.value).removeprefix(f"{path}:")

    trace = "abababababababababababababababab"
    assert fails(root, span("1", "RETRIEVER", 5, **hop), span("2", "RETRIEVER", 5, **hop),
                 answer) == (
        f"1: trace {trace}: spans {'1' * 16} and {'2' * 16} start at the same time and neither "
        "contains the other, so their steps cannot be ordered"
    )  # fmt: skip
    assert fails(root, span("1", "RETRIEVER", 5, **hop), span("2", "RETRIEVER", 6), answer) == (
        f"1: trace {trace}: span {'2' * 16} (retriever): a retrieval step without its "
        "documents (no output)"
    )
    assert fails(root, span("1", "RETRIEVER", 5, **hop), span("2", "TOOL", 6)) == (
        f"1: trace {trace}: no answer (no text reply on an LLM span that calls no tool, no "
        "text output on the trace or its root)"
    )
