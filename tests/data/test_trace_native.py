"""ragbatch's own JSONL with traces: a line with ``steps`` is a trace, any other line the row
it always was; errors name the file, the line and the field; a trace's native line reads
back as the same trace."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ragbatch.core import DatasetError, Row, Trace
from ragbatch.data import JsonlReader
from ragbatch.data._formats import open_items
from ragbatch.data._native import native_line, parse_item, trace_line

ROW = {"id": "r1", "question": "q", "contexts": [{"id": "c1", "text": "t"}], "answer": "a"}
TRACE: dict[str, Any] = {
    "id": "t1",
    "steps": [
        {"kind": "user", "text": "Where is order A1?", "span": "s0"},
        {"kind": "retrieval", "query": "order A1 status",
         "contexts": [{"id": "kb-1", "text": "Orders ship in 2 days.", "source": "faq.md"}]},
        {"kind": "tool", "name": "lookup_order", "input": {"order_id": "A1"},
         "output": {"status": "shipped", "carrier": None}},
        {"kind": "answer", "text": "It shipped.",
         "expected": {"diagnosis": "PASS"}},
    ],
    "referenceAnswer": "It has shipped.",
    "expected": {"diagnosis": "PASS", "firstFailingStep": None},
    "metadata": {"team": "support"},
    "sessionId": "s-1",
}  # fmt: skip


def write(path: Path, *records: Any) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def test_rows_and_traces_in_file_order(tmp_path: Path) -> None:
    path = write(tmp_path / "d.jsonl", ROW, TRACE, ROW | {"id": "r2"})
    source = open_items(path, "jsonl")
    items = list(source.items())
    assert [(type(i).__name__, i.id) for i in items] == [("Row", "r1"), ("Trace", "t1"),
                                                         ("Row", "r2")]  # fmt: skip
    assert items[0] == Row.model_validate(ROW)
    trace = items[1]
    assert isinstance(trace, Trace) and trace == Trace.model_validate(TRACE)
    assert source.rows == 3 and len(source.sha256) == 64
    # the row reader as it was: a trace line is not a row
    with pytest.raises(DatasetError, match=r"d.jsonl:2: unknown field 'steps'"):
        list(JsonlReader(path))


def test_a_trace_line_reads_back_as_the_same_trace() -> None:
    trace = Trace.model_validate(TRACE)
    line = trace_line(trace)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert parse_item(line) == trace
    data = json.loads(line)
    # camelCase, no nulls, except a label that says no step fails and a tool's own data
    assert data["expected"] == {"diagnosis": "PASS", "firstFailingStep": None}
    assert data["steps"][2]["output"] == {"status": "shipped", "carrier": None}
    assert "traceId" not in data and data["referenceAnswer"] == "It has shipped."
    unlabelled = Trace.model_validate(TRACE | {"expected": {"diagnosis": "PASS"}})
    assert json.loads(trace_line(unlabelled))["expected"] == {"diagnosis": "PASS"}
    row = Row.model_validate(ROW)
    assert parse_item(native_line(row)) == row and native_line(trace) == line


def test_ignore_unknown_fields_on_a_trace_line(tmp_path: Path) -> None:
    path = write(tmp_path / "d.jsonl", TRACE | {"score": 3})
    with pytest.raises(DatasetError, match=r"d.jsonl:1: unknown field 'score'"):
        list(open_items(path, "jsonl").items())
    (trace,) = open_items(path, "jsonl", ignore_unknown_fields=True).items()
    assert trace == Trace.model_validate(TRACE)


def step(index: int, **fields: Any) -> dict[str, Any]:
    steps = [dict(s) for s in TRACE["steps"]]
    steps[index] = fields
    return TRACE | {"steps": steps}


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (step(1, kind="search", query="x"),
         "field 'steps[1].kind': unknown step kind 'search' (one of user, retrieval, tool, answer)"),
        (step(1, query="x", contexts=[]), "missing field 'steps[1].kind'"),
        (step(1, kind="retrieval", query="x", contexts=[{"id": 7, "text": "t"}]),
         "field 'steps[1].contexts[0].id': expected a string"),
        (step(1, kind="retrieval", contexts=[]), "missing field 'steps[1].query'"),
        (step(2, kind="tool", name="", input=None),
         "field 'steps[2].name': must not be empty"),
        (step(3, kind="user", text="again"),
         "steps[0]: the turn this user step starts has no answer step"),
        (TRACE | {"steps": []}, "steps: a trace needs at least one step"),
        (TRACE | {"steps": "none"}, "field 'steps': expected an array"),
        (TRACE | {"expected": {"firstFailingStep": 9}},
         "expected.firstFailingStep: 9 is not a step index (the trace has 4 steps)"),
        (step(1, kind="retrieval", query="x", contexts=[{"id": "a", "text": "1"},
                                                          {"id": "a", "text": "2"}]),
         "steps[1].contexts[1].id: duplicate context id 'a'"),
    ],
)  # fmt: skip
def test_a_bad_trace_line_names_file_line_and_field(
    tmp_path: Path, line: dict[str, Any], message: str
) -> None:
    path = write(tmp_path / "d.jsonl", ROW, line)
    with pytest.raises(DatasetError) as err:
        list(open_items(path, "jsonl").items())
    assert str(err.value) == f"{path}:2: {message}"


def test_row_and_trace_ids_share_one_namespace(tmp_path: Path) -> None:
    path = write(tmp_path / "d.jsonl", ROW, TRACE | {"id": "r1"})
    with pytest.raises(DatasetError) as err:
        list(open_items(path, "jsonl").items())
    assert str(err.value) == f"{path}:2: duplicate row id 'r1'"


def test_flatten_a_native_trace(tmp_path: Path) -> None:
    path = write(tmp_path / "d.jsonl", TRACE)
    (row,) = open_items(path, "jsonl", flatten=True).items()
    assert isinstance(row, Row)
    assert (row.id, row.question, [c.id for c in row.contexts], row.answer) == (
        "t1", "Where is order A1?", ["kb-1"], "It shipped.")  # fmt: skip
    assert row.reference_answer == "It has shipped." and row.metadata == {"team": "support"}
