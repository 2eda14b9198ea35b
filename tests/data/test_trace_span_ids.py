"""Every step the OpenInference and Langfuse trace readers give names a span that is in its
file, and a trace names its root span: what the exports annotate (expected.json lists no
span ids, so they are checked here, against the ids each file itself holds)."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from ragbatch.core import Trace
from ragbatch.data._trace_langfuse import LangfuseTraceReader
from ragbatch.data._trace_openinference import OpenInferenceTraceReader

ROOT = Path(__file__).resolve().parents[2]
OPENINFERENCE = ROOT / "tests/fixtures/real/traces/openinference"
CONVERSATIONS = ROOT / "tests/fixtures/real/traces/conversations"
OI_FILES = [
    "langgraph-1.2.24-otlp-protobuf.json",
    "langgraph-1.2.24-phoenix-20.26.1-get-spans.json",
    "langgraph-1.2.24-phoenix-20.26.1-spans.jsonl",
    "langgraph-1.2.24-phoenix-20.26.1-spans.parquet",
    "llamaindex-0.14.25-otlp-protobuf.json",
    "openai-agents-0.24.0-retriever-kind-otlp-protobuf.json",
    "openai-agents-0.24.0-tools-otlp-protobuf.json",
]
LANGFUSE_FILES = [
    "langfuse-3.14.6-otlp-sent.json",
    "langfuse-3.14.6-trace-get.jsonl",
    "langfuse-5.2.0-observations-v2-page.json",
    "langfuse-5.2.0-observations-v2-session-conv-s4.json",
    "langfuse-5.2.0-observations-v2-session-conv-s5.json",
    "langfuse-5.2.0-observations-v2-session-conv-s7.json",
    "langfuse-5.2.0-otlp-sent.json",
]
HEX_SPAN = re.compile(r"[0-9a-f]{16}")


def hex_span(value: str) -> str:
    """An OTLP span id as the readers write it: hex (protobuf JSON writes base64)."""
    return value if HEX_SPAN.fullmatch(value) else base64.b64decode(value).hex()


def records(path: Path) -> Iterator[Any]:
    text = path.read_text(encoding="utf-8")
    try:
        yield json.loads(text)
    except json.JSONDecodeError:
        yield from (json.loads(line) for line in text.splitlines() if line.strip())


def walk(value: Any) -> Iterator[dict[str, Any]]:
    if isinstance(value, dict):
        yield value
        for item in value.values():
            yield from walk(item)
    elif isinstance(value, list):
        for item in value:
            yield from walk(item)


def span_ids(path: Path) -> set[str]:
    """The ids of the spans (observations) the file holds, read without ragbatch: OTLP's
    ``spanId``, Phoenix's ``context.span_id``, a Langfuse observation's ``id``."""
    if path.suffix == ".parquet":
        return {str(v) for v in pq.read_table(path).column("context.span_id").to_pylist()}
    found: set[str] = set()
    for record in records(path):
        for item in walk(record):
            if isinstance(item.get("spanId"), str):
                found.add(hex_span(item["spanId"]))
            if isinstance(item.get("context.span_id"), str):
                found.add(item["context.span_id"])
            context = item.get("context")
            if isinstance(context, dict) and isinstance(context.get("span_id"), str):
                found.add(context["span_id"])
            if isinstance(item.get("traceId"), str) and "type" in item and "id" in item:
                found.add(item["id"])  # a Langfuse observation
    return found


def check_spans(traces: list[Trace], ids: set[str]) -> None:
    assert traces
    for trace in traces:
        for index, step in enumerate(trace.steps):
            assert step.span in ids, (trace.id, index, step.kind, step.span)
        is_session = trace.metadata is not None and "traces" in trace.metadata
        if is_session:  # one root a turn: each turn's user step names it
            assert trace.spans is None
        else:
            assert trace.spans is not None and trace.spans.root == trace.steps[0].span


@pytest.mark.parametrize("name", OI_FILES)
def test_openinference_steps_name_spans_of_their_file(name: str) -> None:
    path = OPENINFERENCE / name
    items = list(OpenInferenceTraceReader(path, steps=True).items())
    check_spans([t for t in items if isinstance(t, Trace)], span_ids(path))
    assert len(span_ids(path)) > 50  # the walk found the file's spans


@pytest.mark.parametrize("name", LANGFUSE_FILES)
def test_langfuse_steps_name_observations_of_their_file(name: str) -> None:
    path = CONVERSATIONS / name
    items = list(LangfuseTraceReader(path, steps=True).items())
    check_spans([t for t in items if isinstance(t, Trace)], span_ids(path))


def test_sessions_without_observations_name_no_span() -> None:
    # api.sessions.get gives traces without observations: nothing to name, nothing invented
    path = CONVERSATIONS / "langfuse-3.14.6-session-get.jsonl"
    traces = [t for t in LangfuseTraceReader(path).items() if isinstance(t, Trace)]
    assert len(traces) == 3
    assert all(step.span is None for t in traces for step in t.steps)
    assert all(t.spans is None for t in traces)


def test_a_trace_root_is_the_span_without_a_parent() -> None:
    path = OPENINFERENCE / "langgraph-1.2.24-otlp-protobuf.json"
    (request,) = records(path)
    parents = {
        hex_span(s["spanId"]): s.get("parentSpanId")
        for s in walk(request)
        if isinstance(s.get("spanId"), str)
    }
    traces = [t for t in OpenInferenceTraceReader(path).items() if isinstance(t, Trace)]
    roots = [t.spans.root for t in traces if t.spans is not None]
    assert len(roots) == 4  # S1, S2, S3, S6: the others are sessions or rows
    assert all(root is not None and not parents[root] for root in roots)
