"""A trace whose steps cannot be ordered, a retrieval step without its documents or a trace
without an answer is an error naming the file, the line and the trace, never a guess."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ragbatch.core import DatasetError, Row, Trace
from ragbatch.data._formats import open_items
from ragbatch.data._trace_langfuse import LangfuseTraceReader

T0 = "2026-01-02T03:04:05.000000Z"


def at(ms: int) -> str:
    return f"2026-01-02T03:04:05.{ms:03d}000Z"


def obs(id: str, type: str, start: str | None, **fields: Any) -> dict[str, Any]:
    """A Langfuse 5.x observation (inputs and outputs are JSON text there)."""
    record = {"id": id, "traceId": "t1", "type": type, "name": type.lower(), "startTime": start,
              "parentObservationId": "root", **fields}  # fmt: skip
    for key in ("input", "output"):
        if key in record and not isinstance(record[key], str):
            record[key] = json.dumps(record[key])
    return record


ROOT = obs("root", "AGENT", T0, parentObservationId="remote", isRootObservation=True,
           input={"args": ["Where is my order?"], "kwargs": {}})  # fmt: skip
ANSWER = obs("gen", "GENERATION", at(9), output={"role": "assistant", "content": "It shipped."})


def hop(id: str, start: str | None, **fields: Any) -> dict[str, Any]:
    docs = [{"page_content": f"doc of {id}", "metadata": {"id": f"d-{id}"}}]
    return obs(id, "RETRIEVER", start, input={"query": f"query {id}"}, output=docs) | fields


def items(tmp_path: Path, *records: dict[str, Any], **options: Any) -> list[Row | Trace]:
    path = tmp_path / "obs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return list(open_items(path, "langfuse", **options).items())


def failure(tmp_path: Path, *records: dict[str, Any], **options: Any) -> str:
    with pytest.raises(DatasetError) as err:
        items(tmp_path, *records, **options)
    return str(err.value).removeprefix(f"{tmp_path / 'obs.jsonl'}:")


def kinds(item: Row | Trace) -> list[tuple[str, str | None]]:
    assert isinstance(item, Trace)
    return [(s.kind, s.span) for s in item.steps]


def test_steps_follow_start_times_not_file_order(tmp_path: Path) -> None:
    (trace,) = items(tmp_path, ANSWER, hop("h2", at(5)), ROOT, hop("h1", at(1)))
    assert kinds(trace) == [("user", "root"), ("retrieval", "h1"), ("retrieval", "h2"),
                            ("answer", "gen")]  # fmt: skip


def test_a_tie_is_broken_by_the_parent_link(tmp_path: Path) -> None:
    # a tool and a tool it calls start in the same millisecond: the outer one first
    outer = obs("outer", "TOOL", at(1), input={"args": [], "kwargs": {"q": "x"}}, output="done")
    inner = obs("inner", "TOOL", at(1), parentObservationId="outer", output={"n": 1})
    (trace,) = items(tmp_path, ROOT, inner, outer, ANSWER)
    assert kinds(trace) == [("user", "root"), ("tool", "outer"), ("tool", "inner"),
                            ("answer", "gen")]  # fmt: skip
    assert isinstance(trace, Trace) and trace.steps[1].model_dump()["input"] == {"q": "x"}


def test_a_tool_that_retrieves_is_its_retrieval(tmp_path: Path) -> None:
    # LangGraph and LlamaIndex put the retriever inside the tool: one retrieval step
    tool = obs("tool", "TOOL", at(1), input={"args": [], "kwargs": {"q": "x"}}, output="text")
    inner = hop("inner", at(2), parentObservationId="tool")
    (trace,) = items(tmp_path, ROOT, inner, tool, hop("h2", at(5)), ANSWER)
    assert kinds(trace) == [("user", "root"), ("retrieval", "inner"), ("retrieval", "h2"),
                            ("answer", "gen")]  # fmt: skip


def test_steps_that_cannot_be_ordered(tmp_path: Path) -> None:
    assert failure(tmp_path, ROOT, hop("h1", at(1)), hop("h2", at(1)), ANSWER) == (
        "1: trace t1: spans h1 and h2 start at the same time and neither contains the other, "
        "so their steps cannot be ordered"
    )
    assert failure(tmp_path, ROOT, hop("h1", at(1)), hop("h2", None), ANSWER) == (
        "1: trace t1: span h2 (retriever) has no start time, so its steps cannot be ordered"
    )
    # one step needs no order: nor does a trace the single-turn reader reads as a row
    (row,) = items(tmp_path, ROOT, hop("h1", None), ANSWER)
    assert isinstance(row, Row) and [c.id for c in row.contexts] == ["d-h1"]


def test_a_retrieval_step_without_its_documents(tmp_path: Path) -> None:
    bare = hop("h2", at(5))
    del bare["output"]
    assert failure(tmp_path, ROOT, hop("h1", at(1)), bare, ANSWER) == (
        "1: trace t1: span h2 (retriever): a retrieval step without its documents (no output)"
    )
    # an empty list is documents: a hop that found nothing (judged a miss, not refused)
    (trace,) = items(tmp_path, ROOT, hop("h1", at(1)), hop("h2", at(5), output="[]"), ANSWER)
    assert isinstance(trace, Trace) and trace.steps[2].model_dump()["contexts"] == []


def test_a_trace_without_an_answer(tmp_path: Path) -> None:
    root = ROOT | {"output": None}
    assert failure(tmp_path, root, hop("h1", at(1)), hop("h2", at(5))) == (
        "1: trace t1: no answer (no text reply on an LLM span that calls no tool, no text "
        "output on the trace or its root)"
    )
    # an LLM call that only calls tools is no answer; the root's output then is
    calls = obs("gen", "GENERATION", at(9), output={"role": "assistant", "content": "Let me see.",
                "tool_calls": [{"name": "search"}]})  # fmt: skip
    (trace,) = items(tmp_path, ROOT | {"output": "Shipped."}, hop("h1", at(1)),
                     hop("h2", at(5)), calls)  # fmt: skip
    assert isinstance(trace, Trace) and trace.steps[-1].model_dump()["text"] == "Shipped."
    assert trace.steps[-1].span == "root"


def session_trace(n: int, start: str | None) -> list[dict[str, Any]]:
    trace = {"traceId": f"t{n}", "sessionId": "s1"}
    root = ROOT | trace | {"id": f"r{n}", "startTime": start,
                           "input": json.dumps({"args": [f"question {n}"], "kwargs": {}})}  # fmt: skip
    answer = ANSWER | trace | {"id": f"g{n}", "parentObservationId": f"r{n}", "startTime": start}
    answer["output"] = json.dumps({"role": "assistant", "content": f"answer {n}"})
    return [answer, root]


def test_a_sessions_turns_follow_the_traces_start_times(tmp_path: Path) -> None:
    (trace,) = items(tmp_path, *session_trace(2, at(50)), *session_trace(1, at(10)))
    assert isinstance(trace, Trace) and (trace.id, trace.session_id) == ("s1", "s1")
    assert [s.model_dump().get("text") for s in trace.steps] == [
        "question 1", "answer 1", "question 2", "answer 2"]  # fmt: skip
    assert trace.metadata == {"traces": ["t1", "t2"]}
    # alone, each trace is the row the single-turn reader gives
    reader = LangfuseTraceReader(tmp_path / "obs.jsonl", sessions=False)
    rows = list(reader.items())
    assert [(r.id, type(r).__name__) for r in rows] == [("t2", "Row"), ("t1", "Row")]


def test_a_sessions_turns_that_cannot_be_ordered(tmp_path: Path) -> None:
    assert failure(tmp_path, *session_trace(1, at(10)), *session_trace(2, at(10))) == (
        "1: session s1: traces t1 and t2 start at the same time, so their turns cannot be ordered"
    )
    untimed = [{**r, "startTime": None} for r in session_trace(2, None)]
    assert failure(tmp_path, *session_trace(1, at(10)), *untimed) == (
        "1: session s1: trace t2 has no start time, so its turns cannot be ordered"
    )


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_ragas_conversations_that_are_not_traces(tmp_path: Path) -> None:
    def fails(*messages: dict[str, Any]) -> str:
        path = write(tmp_path / "s.jsonl", json.dumps({"user_input": list(messages)}) + "\n")
        with pytest.raises(DatasetError) as err:
            list(open_items(path, "ragas", retrieval_tools={"search"}).items())
        return str(err.value).removeprefix(f"{path}:")

    human = {"type": "human", "content": "q"}
    call = {"type": "ai", "content": "", "tool_calls": [{"name": "search", "args": {"query": "x"}}]}
    assert fails(human, call, {"type": "ai", "content": "a"}) == (
        "1: conversation row-1: user_input[1].tool_calls[0]: a retrieval step without its "
        "documents (no output)"
    )
    assert fails(human, {"type": "tool", "content": "x"}) == (
        "1: conversation row-1: user_input[1]: a tool message without a tool call before it"
    )
    assert fails(human, call, {"type": "tool", "content": "d1\n\nd2"}) == (
        "1: conversation row-1: steps[0]: the turn this user step starts has no answer step"
    )
    assert fails({"type": "ai", "content": "hello"}, human) == (
        "1: conversation row-1: steps[0]: a trace starts with a user step (the question), not "
        "'answer'"
    )
    assert fails(human, {"type": "system", "content": "x"}) == (
        "1: conversation row-1: user_input[1].type: expected human, ai or tool, got 'system'"
    )


def test_deepeval_conversations_that_are_not_traces(tmp_path: Path) -> None:
    def fails(*turns: dict[str, Any]) -> str:
        record = {"name": "c1", "turns": list(turns)}
        path = write(tmp_path / "c.json", json.dumps([record]))
        with pytest.raises(DatasetError) as err:
            list(open_items(path, "deepeval").items())
        return str(err.value).removeprefix(f"{path}:")

    user = {"role": "user", "content": "q"}
    assert fails(user, {"role": "user", "content": "again"}) == (
        "1: conversation c1: steps[0]: the turn this user step starts has no answer step"
    )
    assert fails(user, {"role": "bot", "content": "a"}) == (
        "1: conversation c1: turns[1].role: expected user or assistant, got 'bot'"
    )
    tool = {"role": "assistant", "content": "a", "tools_called": [{"name": "", "output": 1}]}
    assert fails(user, tool) == (
        "1: conversation c1: turns[1].tools_called[0]: a tool call without a name"
    )
