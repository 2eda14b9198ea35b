"""Spans → traces of steps: what the OpenInference and Langfuse trace readers share
(docs/semantics.md §8).

A span trace (one request of an agent: a turn) becomes steps in start-time order:

- the *user* step: the trace's own input (Langfuse), else the root span's text input (the
  root: the span its tool marks so, else the one without a parent in the trace), else the
  text a function the root traced was called with (``{"args": [text], "kwargs": {}}``),
  else the root's user message, else the first LLM span's last user message;
- a *retrieval* step per RETRIEVER span (query: its input; documents: its output) and per
  TOOL span whose output is documents or whose name is a ``--retrieval-tool``; the spans
  inside a retrieval step are part of it, and a TOOL span that holds a RETRIEVER span is
  that retrieval (LangGraph and LlamaIndex retrieval tools), never also a tool step;
- a *tool* step per other TOOL span (input: the arguments of the LLM's call it answers, else
  its input, a traced function's keyword arguments; output: what the tool returned);
- the *answer*: the last LLM reply of the turn (not inside a step) that calls no tool, else
  the trace's own output, else the root's. It closes the turn; other LLM spans (calls that
  only call tools) are not steps.

Each step names its span (``span``, what the exports annotate): the user step its turn's root
span, a retrieval or tool step its own, the answer its LLM span (the root, when the text is
the trace's or the root's output). A trace names its root span (``spans.root``); a session
has no one root: each turn's user step names its own.

Steps are ordered by start time; a tie is broken by containment (the parent first). Two
steps without start times, or starting together with neither inside the other, cannot be
ordered: an error naming the trace, never a guess; so is a retrieval step without its
documents (no output) and a turn without an answer.

The traces of one session (``session.id``, Langfuse's session id) are one trace of turns,
ordered by their start times (the same rules), its id the session id, ``metadata.traces``
its trace ids in turn order. A trace that is not part of a longer session and holds at
most one RETRIEVER span and no TOOL span is the row the single-turn readers give
(:func:`ragbatch.data._traces.trace_row`), unless ``steps`` asks for every trace; with
``flatten`` every trace is that row.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from contextlib import closing
from typing import Any

from pydantic import ValidationError

from ragbatch.core import AnswerStep, Row, Trace, UserStep
from ragbatch.core import Spans as SpanIds
from ragbatch.data._base import SeenIds, describe
from ragbatch.data._records import CellError
from ragbatch.data._steps import (
    Step,
    StepOptions,
    make_trace,
    query_of,
    recognized_documents,
    retrieval,
    retrieval_or_tool,
)
from ragbatch.data._traces import Span, TraceReader, first_argument, trace_row
from ragbatch.data._traces import Trace as SpanTrace


class Spans:
    """One span trace's spans with their containment (parent links)."""

    def __init__(self, trace: SpanTrace, where: str) -> None:
        self.trace, self.where = trace, where
        self.by_id = {s.id: s for s in trace.spans}

    def ancestors(self, span: Span) -> list[str]:
        """The ids of the spans that contain ``span``, nearest first."""
        found: list[str] = []
        parent = span.parent
        while parent in self.by_id and parent not in found:
            found.append(parent)
            parent = self.by_id[parent].parent
        return found

    def root(self) -> Span | None:
        marked = [s for s in self.trace.spans if s.is_root]
        tops = marked or [s for s in self.trace.spans if s.parent not in self.by_id]
        return tops[0] if len(tops) == 1 else None

    def ordered(self, spans: list[Span]) -> list[Span]:
        """``spans`` by start time, a container before what it contains; CellError when
        two cannot be ordered."""
        if len(spans) < 2:
            return spans
        for span in spans:
            if span.start is None:
                raise CellError(
                    f"{self.where}: span {span.id} ({span.name or span.kind}) has no start "
                    "time, so its steps cannot be ordered"
                )
        ranked = sorted(spans, key=lambda s: (s.start, len(self.ancestors(s))))
        for a, b in itertools.pairwise(ranked):
            if a.start == b.start and a.id not in self.ancestors(b):
                raise CellError(
                    f"{self.where}: spans {a.id} and {b.id} start at the same time and neither "
                    "contains the other, so their steps cannot be ordered"
                )
        return ranked


def step_kind(span: Span, options: StepOptions) -> str | None:
    """``retrieval``, ``tool`` or None (not a step) for one span, by itself."""
    if span.kind == "RETRIEVER":
        return "retrieval"
    if span.kind != "TOOL":
        return None
    named = span.name in options.retrieval_tools
    return "retrieval" if named or recognized_documents(span.data_output) is not None else "tool"


def is_simple(trace: SpanTrace) -> bool:
    """A trace the single-turn readers read as a row: at most one RETRIEVER, no TOOL."""
    kinds = [s.kind for s in trace.spans]
    return kinds.count("RETRIEVER") <= 1 and "TOOL" not in kinds


def called_with(value: Any) -> Any:
    """A traced function's input: its keyword arguments, or its positional ones."""
    if isinstance(value, dict) and set(value) <= {"args", "kwargs"}:
        if not value.get("args"):
            return value.get("kwargs")
        if not value.get("kwargs"):
            return value["args"]
    return value


def step_spans(spans: Spans, options: StepOptions) -> list[Span]:
    """The spans that are steps: a retrieval (a RETRIEVER, a TOOL that returns documents or
    is named) and what it holds is one step; a TOOL that holds a RETRIEVER is that
    retrieval (LangGraph, LlamaIndex); any other TOOL is a tool step."""
    inside = {s.id: set(spans.ancestors(s)) for s in spans.trace.spans}
    holders = {a for s in spans.trace.spans if s.kind == "RETRIEVER" for a in inside[s.id]}
    kinds = {s.id: None if s.id in holders and s.kind == "TOOL" else step_kind(s, options)
             for s in spans.trace.spans}  # fmt: skip
    retrievals = {i for i, k in kinds.items() if k == "retrieval"}
    return [s for s in spans.trace.spans if kinds[s.id] and not inside[s.id] & retrievals]


def turn_llms(spans: Spans, steps: list[Span]) -> list[Span]:
    """The LLM spans of the turn itself (not those a step made)."""
    taken = {s.id for s in steps}
    return [s for s in spans.trace.spans
            if s.kind == "LLM" and not taken.intersection(spans.ancestors(s))]  # fmt: skip


def question_of(spans: Spans, llms: list[Span]) -> str:
    """The turn's question (see the module docstring)."""
    trace, root = spans.trace, spans.root()
    asked = [s for s in llms if s.user_message is not None]
    if len({s.user_message for s in asked}) > 1:
        asked = spans.ordered(asked)
    candidates = (trace.input, root.input if root else None,
                  first_argument(root.data_input) if root else None,
                  root.user_message if root else None,
                  asked[0].user_message if asked else None)  # fmt: skip
    found = next((c for c in candidates if isinstance(c, str)), None)
    if found is None:
        raise CellError(
            f"{spans.where}: no question (no text input on the trace or its root span, no "
            "user message on an LLM span)"
        )
    return found


def answer_of(spans: Spans, llms: list[Span]) -> AnswerStep:
    """The turn's answer: the last LLM reply that calls no tool, else the trace's or the
    root's output."""
    replies = [(s, s.assistant_message or s.output) for s in llms if not s.calls_tools]
    said = {s.id: text for s, text in replies if text is not None}
    last = spans.ordered([s for s in llms if s.id in said])[-1:]
    root = spans.root()
    found = [(said[s.id], s.id) for s in last] + [
        (spans.trace.output, root.id if root else None),
        (root.output if root else None, root.id if root else None),
    ]
    text, span_id = next(((t, i) for t, i in found if t is not None), (None, None))
    if text is None:
        raise CellError(
            f"{spans.where}: no answer (no text reply on an LLM span that calls no tool, no "
            "text output on the trace or its root)"
        )
    return AnswerStep(kind="answer", text=text, span=span_id)


def tool_input(span: Span, llms: list[Span]) -> Any:
    """A tool step's input: the arguments of the call it answers, where the LLM's reply
    says (LangChain records a one-argument tool's input as the bare value), else its
    traced input."""
    if span.tool_call_id is not None:
        for llm in llms:
            for call, arguments in llm.tool_calls:
                if call == span.tool_call_id:
                    return arguments
    return called_with(span.data_input)


def turn_steps(trace: SpanTrace, options: StepOptions, where: str) -> list[Step]:
    """The steps of one span trace: its user step, retrievals and tools, and its answer."""
    spans = Spans(trace, where)
    chosen = step_spans(spans, options)
    llms = turn_llms(spans, chosen)
    question = question_of(spans, llms)
    root = spans.root()
    steps: list[Step] = [UserStep(kind="user", text=question, span=root.id if root else None)]
    for span in spans.ordered(chosen):
        at = f"{where}: span {span.id} ({span.name or span.kind})"
        if span.kind == "TOOL":
            steps.append(retrieval_or_tool(span.name or "tool", tool_input(span, llms),
                                           span.data_output, question, options, at,
                                           span.id))  # fmt: skip
            continue
        if not span.documents and span.data_output is None:
            raise CellError(f"{at}: a retrieval step without its documents (no output)")
        query = span.input if span.input is not None else query_of(span.data_input)
        steps.append(retrieval(query, span.documents, question, span.id))
    steps.append(answer_of(spans, llms))
    return steps


def start_of(trace: SpanTrace) -> int | None:
    starts = [s.start for s in trace.spans if s.start is not None]
    return trace.start if trace.start is not None else min(starts, default=None)


def session_of(trace: SpanTrace) -> str | None:
    return trace.session or next((s.session for s in trace.spans if s.session), None)


def sessions(traces: list[SpanTrace], options: StepOptions) -> list[list[SpanTrace]]:
    """The traces grouped by session (first seen first); each trace alone without one, or
    when sessions are not joined (``flatten``, ``sessions=False``)."""
    if options.flatten or not options.sessions:
        return [[t] for t in traces]
    groups: dict[str, list[SpanTrace]] = {}
    for trace in traces:
        groups.setdefault(session_of(trace) or f"\0{trace.id}", []).append(trace)
    return list(groups.values())


def turns_in_order(session: str, traces: list[SpanTrace]) -> list[SpanTrace]:
    """A session's traces by start time; CellError when two cannot be ordered."""
    for trace in traces:
        if start_of(trace) is None:
            raise CellError(
                f"session {session}: trace {trace.id} has no start time, so its turns "
                "cannot be ordered"
            )
    ranked = sorted(traces, key=lambda t: start_of(t) or 0)
    for a, b in itertools.pairwise(ranked):
        if start_of(a) == start_of(b):
            raise CellError(
                f"session {session}: traces {a.id} and {b.id} start at the same time, so "
                "their turns cannot be ordered"
            )
    return ranked


def group_item(group: list[SpanTrace], options: StepOptions) -> Row | Trace:
    """The row or trace one trace, or one session's traces, is read as."""
    first = group[0]
    session = session_of(first)
    if len(group) == 1:
        if options.flatten or (not options.steps and is_simple(first)):
            return trace_row(first)
        where = f"trace {first.id}"
        own = turn_steps(first, options, where)
        root = own[0].span  # the user step names the root span (turn_steps)
        return make_trace(where, id=first.id, steps=own, trace_id=first.id,
                          session_id=session, spans=SpanIds(root=root) if root else None)  # fmt: skip
    assert session is not None
    turns = turns_in_order(session, group)
    steps: list[Step] = []
    for trace in turns:
        steps += turn_steps(trace, options, f"session {session}: trace {trace.id}")
    return make_trace(f"session {session}", id=session, steps=steps, session_id=session,
                      metadata={"traces": [t.id for t in turns]})  # fmt: skip


class SpanTraceReader(TraceReader):
    """A span reader's rows and traces (``items()``): subclasses give every trace of the
    file (:meth:`_all_traces`) and set ``options``."""

    options = StepOptions()

    def _all_traces(self) -> list[SpanTrace]:
        raise NotImplementedError

    def items(self) -> Iterator[Row | Trace]:
        """Every trace (or session) in the order first seen: a row or a trace."""
        return (item for _, item in self._lined_items())

    def __iter__(self) -> Iterator[Row]:
        for line, item in self._lined_items():
            if isinstance(item, Trace):
                raise self._error(line, f"trace {item.id}: a multi-step trace, not a row")
            yield item

    def _lined_items(self) -> Iterator[tuple[int, Row | Trace]]:
        with closing(SeenIds()) as ids:
            for group in sessions(self._all_traces(), self.options):
                line = group[0].line
                try:
                    item = group_item(group, self.options)
                except CellError as exc:
                    raise self._error(line, str(exc)) from None
                except ValidationError as exc:
                    message = describe(exc, ignore_hint=False)
                    raise self._error(line, f"trace {group[0].id}: {message}") from None
                yield line, self._admit(item, line, ids)
        self._finish()
