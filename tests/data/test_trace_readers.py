"""Conversations and agent traces written by deepeval, ragas and the Langfuse SDK are read as
the steps expected.json gives, every step of every record of every file; single-turn
datasets are read as the very rows the single-turn readers give (issue 46).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ragbatch.core import ConfigError, DatasetError, Row, Trace
from ragbatch.data._formats import open_dataset, open_items
from ragbatch.data._trace_langfuse import LangfuseTraceReader
from ragbatch.data._trace_ragas import RagasTraceReader

ROOT = Path(__file__).resolve().parents[2]
CONVERSATIONS = ROOT / "tests/fixtures/real/traces/conversations"
EXPECTED = json.loads((CONVERSATIONS / "expected.json").read_text(encoding="utf-8"))
FILES: dict[str, Any] = EXPECTED["files"]


def fmt(name: str) -> str:
    return name.split("-")[0]


def steps_of(item: Row | Trace) -> list[dict[str, Any]]:
    """A trace's steps in the native shape, without span ids (expected.json has none)."""
    assert isinstance(item, Trace), f"{item.id} was read as a row"
    out = []
    for step in item.steps:
        data = step.model_dump(mode="json", by_alias=True, exclude_none=True)
        data.pop("span", None)
        out.append(data)
    return out


def wanted(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """expected.json's steps as a trace holds them: a retrieval without a query of its own
    (``"query": null``, deepeval) has its turn's question as its query, since a retrieval
    step's query is text in the trace model (docs/semantics.md §8)."""
    out, question = [], None
    for step in steps:
        if step["kind"] == "user":
            question = step["text"]
        if step["kind"] == "retrieval" and step["query"] is None:
            step = {**step, "query": question}
        out.append(step)
    return out


def expected_id(name: str, record_id: str) -> str:
    # expected.json numbers ragas samples row-1, row-2, ...; ragbatch's CSV readers name a
    # record without an id by its line (row-<line>, the header being line 1), as the
    # single-turn readers always have: each sample here is one line
    if name.endswith(".csv") and record_id.startswith("row-"):
        return f"row-{int(record_id[4:]) + 1}"
    return record_id


def read(name: str, **options: Any) -> list[Row | Trace]:
    if fmt(name) == "ragas":
        options.setdefault("retrieval_tools", {"search_docs"})
    return list(open_items(CONVERSATIONS / name, fmt(name), **options).items())


RECORD_FILES = [n for n in FILES if fmt(n) in ("ragas", "deepeval")]
LANGFUSE_FILES = [n for n in FILES if fmt(n) == "langfuse" and "sessions" in FILES[n]]


@pytest.mark.parametrize("name", RECORD_FILES)
def test_ragas_and_deepeval_conversations_give_every_expected_step(name: str) -> None:
    items = read(name)
    records = FILES[name]["records"]
    assert [i.id for i in items] == [expected_id(name, r["id"]) for r in records]
    for item, record in zip(items, records, strict=True):
        assert steps_of(item) == wanted(record["steps"]), item.id


@pytest.mark.parametrize("name", LANGFUSE_FILES)
def test_langfuse_sessions_are_one_trace_of_turns(name: str) -> None:
    items = read(name)
    want = {r["id"]: r for r in FILES[name]["sessions"]}
    alone = {r["id"]: r for r in FILES[name]["records"] if not r["sessionId"]}
    assert sorted(i.id for i in items) == sorted([*want, *alone])
    for item in items:
        record = want.get(item.id) or alone[item.id]
        assert steps_of(item) == wanted(record["steps"]), item.id
        assert isinstance(item, Trace)
        if item.id in want:  # a session: its traces in turn order, whatever the file order
            assert item.session_id == item.id and item.trace_id is None
            assert item.metadata == {"traces": record["traces"]}
        else:
            assert item.trace_id == item.id and item.session_id is None
        # every step but a 3.x session's (traces without observations) names its span
        assert all(s.span for s in item.steps) or name.endswith("session-get.jsonl")


@pytest.mark.parametrize("name", LANGFUSE_FILES)
def test_langfuse_traces_one_by_one(name: str) -> None:
    # steps: a one-hop trace is a trace too (alone, the single-turn reader's row)
    items = list(LangfuseTraceReader(CONVERSATIONS / name, steps=True, sessions=False).items())
    records = {r["id"]: r for r in FILES[name]["records"]}
    assert sorted(i.id for i in items) == sorted(records)
    for item in items:
        assert steps_of(item) == wanted(records[item.id]["steps"]), item.id
        assert isinstance(item, Trace) and item.session_id == records[item.id]["sessionId"]


def test_langfuse_3x_sessions_get_gives_the_turns_it_keeps() -> None:
    name = "langfuse-3.14.6-session-get.jsonl"
    items = read(name)
    records = FILES[name]["records"]
    assert [i.id for i in items] == [r["id"] for r in records]
    for item, record in zip(items, records, strict=True):
        assert steps_of(item) == record["steps"]


def test_langfuse_items_keep_the_order_first_seen() -> None:
    # a 5.x page is newest first: its sessions and traces come in that order, never re-sorted
    items = read("langfuse-5.2.0-observations-v2-page.json")
    scenarios = {r["id"]: r["scenario"] for k in ("records", "sessions")
                 for r in FILES["langfuse-5.2.0-observations-v2-page.json"][k]}  # fmt: skip
    assert [scenarios[i.id] for i in items] == ["S7", "S6", "S5", "S4", "S3", "S2", "S1"]


def test_a_retrieval_tool_needs_its_name_where_its_output_is_joined_text() -> None:
    items = read("ragas-0.4.3-to-jsonl.jsonl", retrieval_tools=())
    s1, s6 = items[0], items[5]
    # S1's hops are tool messages of joined passages: tools, unless named
    assert [s["kind"] for s in steps_of(s1)] == ["user", "tool", "tool", "answer"]
    assert steps_of(s1)[1]["name"] == "search_docs"
    # S6's hops return JSON documents: recognised as retrieval without the name
    assert steps_of(s6) == wanted(FILES["ragas-0.4.3-to-jsonl.jsonl"]["records"][5]["steps"])


def test_a_named_retrieval_tool_must_return_documents() -> None:
    name = "langfuse-3.14.6-trace-get.jsonl"
    with pytest.raises(DatasetError) as err:
        read(name, retrieval_tools={"lookup_order"})
    assert str(err.value) == (
        f"{CONVERSATIONS / name}:9: trace d5b6f29fe537158ca7e84e5c014fa0bb: span "
        "3d69cc095e238119 (lookup_order): a retrieval tool's output must be documents, "
        "strings or text, got object"
    )


def test_flatten_gives_the_one_row_view() -> None:
    name = "langfuse-3.14.6-trace-get.jsonl"
    flat = read(name, flatten=True)
    assert flat == list(open_dataset(CONVERSATIONS / name, "langfuse"))  # the old view
    assert len(flat) == 11 and all(isinstance(r, Row) for r in flat)
    s4 = read("ragas-0.4.3-to-list.json", flatten=True)[3]
    assert isinstance(s4, Row)
    # the last turn: its question, its first hop's documents, its answer
    assert (s4.question, [c.text for c in s4.contexts], s4.answer) == (
        "OK. How do I start a return?",
        ["To start a return, open Orders, choose “Return item” and print the prepaid label we "
         "email you."],
        "Open Orders, choose “Return item”, and print the prepaid label we email you.",
    )  # fmt: skip
    with pytest.raises(ConfigError, match="--flatten gives one row per trace"):
        read(name, flatten=True, steps=True)


def test_a_trace_reader_iterated_for_rows_refuses_a_trace() -> None:
    reader = RagasTraceReader(CONVERSATIONS / "ragas-0.4.3-to-jsonl.jsonl")
    with pytest.raises(DatasetError) as err:
        list(reader)
    assert str(err.value) == (
        f"{reader.path}:1: conversation row-1: a multi-turn sample is a trace, not a row"
    )
    spans = LangfuseTraceReader(CONVERSATIONS / "langfuse-3.14.6-trace-get.jsonl")
    with pytest.raises(DatasetError) as err:
        list(spans)
    assert str(err.value) == (
        f"{spans.path}:1: trace f7a1c999c3cac0e44ed64c1a17b08354: a multi-step trace, not a row"
    )


# --- single-turn datasets: the same rows as before -------------------------------------------

SINGLE_TURN = [
    *[(f"tests/fixtures/real/{n}", "ragas") for n in (
        "ragas-0.4.3-hf-to-csv.csv", "ragas-0.4.3-hf.parquet", "ragas-0.4.3-pandas-records.json",
        "ragas-0.4.3-pandas.parquet", "ragas-0.4.3-to-csv.csv", "ragas-0.4.3-to-jsonl.jsonl",
        "ragas-0.4.3-to-list.json")],
    *[(f"tests/fixtures/real/deepeval-4.3.1-save-as-{k}", "deepeval")
      for k in ("csv.csv", "json.json", "jsonl.jsonl")],
    *[(f"tests/fixtures/real/{n}", "langfuse") for n in (
        "langfuse-3.14.6-trace-get.jsonl", "langfuse-5.2.0-observations-v2-page.json",
        "langfuse-5.2.0-observations-v2.jsonl")],
    ("datasets/samples/ragas-list.json", "ragas"), ("datasets/samples/ragas-sample.csv", "ragas"),
    ("datasets/samples/ragas-sample.jsonl", "ragas"), ("datasets/samples/ragas-v01.json", "ragas"),
    ("datasets/samples/deepeval-sample.csv", "deepeval"),
    ("datasets/samples/deepeval-sample.json", "deepeval"),
    *[(f"tests/fixtures/real/{n}", "openinference") for n in (
        "openinference-0.1.66-otlp-protobuf.json", "phoenix-20.26.1-get-spans.json",
        "phoenix-20.26.1-spans.jsonl", "phoenix-20.26.1-spans.parquet")],
    ("datasets/samples/openinference-otlp.json", "openinference"),
    ("datasets/samples/phoenix-spans.jsonl", "openinference"),
    ("datasets/samples/langfuse-export.json", "langfuse"),
    ("datasets/samples/langfuse-observations.jsonl", "langfuse"),
    *[(f"datasets/{n}", "jsonl") for n in ("rag-fixture.jsonl", "calibration-fixture.jsonl",
                                           "claims-fixture.jsonl", "golden-fixture.jsonl")],
]  # fmt: skip


@pytest.mark.parametrize(("path", "format"), SINGLE_TURN)
def test_single_turn_datasets_give_the_same_rows(path: str, format: str) -> None:
    old = open_dataset(ROOT / path, format)
    new = open_items(ROOT / path, format)
    rows, items = list(old), list(new.items())
    assert [i.model_dump_json() for i in items] == [r.model_dump_json() for r in rows]
    assert all(isinstance(i, Row) for i in items)
    assert (new.rows, new.sha256, new.name) == (old.rows, old.sha256, old.name)
