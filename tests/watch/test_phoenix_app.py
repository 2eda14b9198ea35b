"""The instrumented RAG app and a real Phoenix together: traces sent over OTLP/HTTP are read
back through Phoenix's REST API value by value, read by ragbatch's OpenInference reader as
the app meant them, and judged by the mock as their kind says. (Phoenix stopped and started
again under a watcher: tests/watch/test_watch_exactly_once.py.)"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import ragbatch
from ragbatch.core import Row, Trace
from ragbatch.data import open_items
from ragbatch.testing.otlp_app import RagApp, SentTrace
from ragbatch.testing.phoenix import PhoenixError, PhoenixServer
from ragbatch.testing.rag_corpus import KINDS, OVERLAP_DIAGNOSIS, trace_content

SEED = 7


@dataclass(frozen=True)
class Sent:
    project: str
    traces: list[SentTrace]
    spans: list[dict[str, Any]]  # the REST API's records, in insertion order


def send(phoenix: PhoenixServer, project: str, n: int, held: int = 0) -> Sent:
    """Send ``n`` traces with the app and wait until Phoenix holds all their spans (and the
    ``held`` spans the project had before)."""
    with RagApp(phoenix.url, project, SEED) as app:
        traces = app.send(n)
    spans = phoenix.wait_for_spans(project, held + sum(len(t.span_ids) for t in traces))
    return Sent(project, traces, spans)


@pytest.fixture(scope="module")
def sent(phoenix: PhoenixServer) -> Sent:
    """20 traces in a project of this module's own (read only by its tests)."""
    return send(phoenix, f"app-{uuid.uuid4().hex[:8]}", 20)


def test_the_seed_gives_every_kind_and_a_two_hop_trace(sent: Sent) -> None:
    # what the tests below check needs all of them among the 20 traces
    assert {t.kind for t in sent.traces} == set(KINDS)
    assert {t.hops for t in sent.traces} == {1, 2}
    assert [t.content for t in sent.traces] == [trace_content(SEED, i) for i in range(20)]


def test_phoenix_holds_each_span_as_sent(sent: Sent) -> None:
    by_id = {s["context"]["span_id"]: s for s in sent.spans}
    assert len(by_id) == len(sent.spans)
    assert set(by_id) == {i for t in sent.traces for i in t.span_ids}
    for trace in sent.traces:
        root_id, *retriever_ids, llm_id = trace.span_ids
        assert root_id == trace.root_span_id
        assert {by_id[i]["context"]["trace_id"] for i in trace.span_ids} == {trace.trace_id}
        root = by_id[root_id]
        assert (root["span_kind"], root["parent_id"]) == ("CHAIN", None)
        assert root["attributes"] == {"input.value": trace.question, "output.value": trace.answer}
        for span_id, retrieval in zip(retriever_ids, trace.content.retrievals, strict=True):
            span = by_id[span_id]
            assert (span["span_kind"], span["parent_id"]) == ("RETRIEVER", root_id)
            expected: dict[str, Any] = {"input.value": retrieval.query}
            for n, doc in enumerate(retrieval.documents):
                key = f"retrieval.documents.{n}.document"
                expected |= {f"{key}.id": doc.id, f"{key}.content": doc.content,
                             f"{key}.score": doc.score}  # fmt: skip
            assert span["attributes"] == expected
        llm = by_id[llm_id]
        assert (llm["span_kind"], llm["parent_id"]) == ("LLM", root_id)
        attrs = llm["attributes"]
        assert attrs["llm.input_messages.1.message.role"] == "user"
        assert attrs["llm.input_messages.1.message.content"] == trace.question
        assert attrs["llm.output_messages.0.message.role"] == "assistant"
        assert attrs["llm.output_messages.0.message.content"] == trace.answer
        # the hops follow one another inside the root, as the trace reader orders steps
        starts = [by_id[i]["start_time"] for i in trace.span_ids]
        assert starts == sorted(starts) and len(set(starts)) == len(starts)


def test_spans_follows_the_cursor_page_by_page(phoenix: PhoenixServer, sent: Sent) -> None:
    assert phoenix.spans(sent.project, page_size=7) == sent.spans
    assert phoenix.spans(f"never-used-{uuid.uuid4().hex}") == []


def export(sent: Sent, path: Path) -> Path:
    path.write_text(json.dumps(sent.spans), encoding="utf-8")
    return path


def test_the_openinference_reader_reads_each_trace_as_sent(sent: Sent, tmp_path: Path) -> None:
    items = {item.id: item for item in open_items(export(sent, tmp_path / "s.json"),
                                                  "openinference").items()}  # fmt: skip
    assert set(items) == {t.trace_id for t in sent.traces}
    for trace in sent.traces:
        item = items[trace.trace_id]
        retrievals = trace.content.retrievals
        if trace.hops == 1:
            assert isinstance(item, Row)
            assert (item.question, item.answer) == (trace.question, trace.answer)
            contexts = [(c.id, c.text) for c in item.contexts]
            assert contexts == [(d.id, d.content) for d in retrievals[0].documents]
            spans = (item.spans.root, item.spans.retriever, item.spans.llm) if item.spans else ()
            assert spans == trace.span_ids
            assert item.trace_id == trace.trace_id
        else:
            assert isinstance(item, Trace)
            steps = [s.model_dump(exclude_none=True) for s in item.steps]
            assert steps == [
                {"kind": "user", "text": trace.question, "span": trace.root_span_id},
                *(
                    {"kind": "retrieval", "query": r.query, "span": span_id,
                     "contexts": [{"id": d.id, "text": d.content} for d in r.documents]}
                    for r, span_id in zip(retrievals, trace.span_ids[1:-1], strict=True)
                ),
                {"kind": "answer", "text": trace.answer, "span": trace.span_ids[-1]},
            ]  # fmt: skip
            assert item.spans is not None and item.spans.root == trace.root_span_id


def test_the_mock_judges_each_trace_as_its_kind_says(sent: Sent, tmp_path: Path) -> None:
    result = ragbatch.evaluate(export(sent, tmp_path / "s.json"), format="openinference",
                               provider="mock", max_report_rows=None)  # fmt: skip
    got = {r.id: r.diagnosis for r in result.row_results()}
    assert got == {t.trace_id: OVERLAP_DIAGNOSIS[t.kind] for t in sent.traces}


def test_span_annotations_reads_what_was_posted(phoenix: PhoenixServer, sent: Sent) -> None:
    roots = [t.root_span_id for t in sent.traces]
    assert phoenix.span_annotations(sent.project, roots) == []
    posted = {roots[0]: ("PASS", 0.9), roots[3]: ("RETRIEVAL_MISS", 0.75)}
    body = {"data": [{"span_id": span_id, "name": "ragbatch", "annotator_kind": "LLM",
                      "result": {"label": label, "score": score}}
                     for span_id, (label, score) in posted.items()]}  # fmt: skip
    phoenix.request_json("POST", "/v1/span_annotations", [("sync", "true")], body)
    found = phoenix.span_annotations(sent.project, roots)
    got = {a["span_id"]: (a["result"]["label"], a["result"]["score"]) for a in found}
    assert got == posted and len(found) == 2
    assert {a["name"] for a in found} == {"ragbatch"}
    assert phoenix.span_annotations(sent.project, roots, page_size=1) == found
    with pytest.raises(PhoenixError, match="HTTP 404"):
        phoenix.span_annotations(sent.project, ["0123456789abcdef"])


def test_the_command_prints_each_trace_it_sends(
    phoenix: PhoenixServer, phoenix_project: str
) -> None:
    command = [sys.executable, "-m", "ragbatch.testing.otlp_app", "--url", phoenix.url,
               "--project", phoenix_project, "--traces", "6", "--rate", "50", "--seed", "3"]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert [(x["index"], x["question"], x["answer"]) for x in lines] == [
        (i, c.question, c.answer) for i, c in enumerate(trace_content(3, i) for i in range(6))
    ]
    spans = phoenix.wait_for_spans(phoenix_project, sum(len(x["span_ids"]) for x in lines))
    assert {s["context"]["span_id"] for s in spans} == {i for x in lines for i in x["span_ids"]}
    roots = {s["context"]["span_id"] for s in spans if s["parent_id"] is None}
    assert roots == {x["root_span_id"] for x in lines}
