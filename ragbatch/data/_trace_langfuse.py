"""Langfuse traces → traces of steps (file I/O), one a trace or a session.

Reads what :class:`LangfuseReader` reads (traces with their observations, observations
alone, API pages), and also:

- sessions as ``api.sessions.get`` returns them (3.x ``SessionWithTraces``: ``{id, traces:
  [...]}``; its traces have no observations, so a turn is its trace's input and output);
- what the SDK sends over OTLP (a request, or a JSON array or JSON lines of requests:
  ``resourceSpans[].scopeSpans[].spans[]`` with ``langfuse.observation.type``,
  ``langfuse.observation.input``/``output`` (JSON text), ``langfuse.trace.input``/``output``,
  ``langfuse.internal.as_root``, ``session.id``; ids in hex or protobuf JSON's base64).

Observation types map to span kinds: ``GENERATION`` is an LLM span, ``RETRIEVER`` and
``TOOL`` as they are (a ``SPAN`` named like a retriever is a RETRIEVER, as in the row
reader); the root is the observation Langfuse marks so (``isRootObservation``,
``langfuse.internal.as_root``), since the SDK gives it a parent that no observation has.
A trace's observations may be anywhere in the file (a 5.x page is newest first; OTLP sends
a span when it ends): the file is read whole. Steps, turns, sessions and rows:
:mod:`ragbatch.data._trace_spans`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from ragbatch.data._langfuse import (
    EXPECTED,
    KINDS,
    LangfuseReader,
    calls_tools,
    documents,
    last_user_message,
    observation_span,
    shape,
    text,
    trace_of,
)
from ragbatch.data._openinference import attributes, hex_id, otlp_span_objects
from ragbatch.data._records import CellError, kind
from ragbatch.data._steps import step_options
from ragbatch.data._trace_spans import SpanTraceReader
from ragbatch.data._traces import Span, decoded, instant
from ragbatch.data._traces import Trace as SpanTrace

SHAPES = f"{EXPECTED}, sessions with traces, or the OTLP requests the SDK sends"


def record_shape(record: Any) -> str | None:
    """``trace``, ``observation``, ``session`` or ``otlp``; None for none of them."""
    if not isinstance(record, dict):
        return None
    if "resourceSpans" in record:
        return "otlp"
    if isinstance(record.get("traces"), list) and "observations" not in record:
        return "session"
    return shape(record)


def otlp_span(span: dict[str, Any], line: int, where: str) -> tuple[Span, str | None, str | None]:
    """One span the Langfuse SDK sent, and the trace's own input and output on it."""
    attrs = attributes(span.get("attributes"))
    trace_id, span_id = hex_id(span.get("traceId"), 16), hex_id(span.get("spanId"), 8)
    for name, value in (("traceId", trace_id), ("spanId", span_id)):
        if not (isinstance(value, str) and value):
            raise CellError(f"{where}{name}: expected a non-empty string, got {kind(value)}")
    obs_type = str(attrs.get("langfuse.observation.type") or "span").upper()
    name = span["name"] if isinstance(span.get("name"), str) else ""
    is_retriever = obs_type == "RETRIEVER" or (obs_type == "SPAN" and "retriev" in name.lower())
    raw_input, raw_output = (
        attrs.get("langfuse.observation.input"),
        attrs.get("langfuse.observation.output"),
    )
    parent = hex_id(span.get("parentSpanId"), 8)
    session = attrs.get("session.id") or attrs.get("langfuse.session.id")
    found = Span(
        trace_id=trace_id,
        id=span_id,
        line=line,
        parent=parent if isinstance(parent, str) and parent else None,
        kind=KINDS.get(obs_type, "RETRIEVER" if is_retriever else obs_type),
        input=text(raw_input),
        output=text(raw_output),
        documents=documents(raw_output, where) if is_retriever else [],
        user_message=last_user_message(raw_input) if obs_type == "GENERATION" else None,
        name=name,
        start=instant(span.get("startTimeUnixNano")),
        data_input=decoded(raw_input),
        data_output=decoded(raw_output),
        session=session if isinstance(session, str) and session else None,
        is_root=attrs.get("langfuse.internal.as_root") is True,
        calls_tools=calls_tools(raw_output),
    )
    return found, text(attrs.get("langfuse.trace.input")), text(attrs.get("langfuse.trace.output"))


def otlp_spans(request: dict[str, Any], line: int) -> Iterator[tuple[Span, str | None, str | None]]:
    """Every span of one OTLP request, in file order."""
    for span, where in otlp_span_objects(request):
        yield otlp_span(span, line, where)


class LangfuseTraceReader(LangfuseReader, SpanTraceReader):
    """A Langfuse export's traces and sessions: rows where a trace is one, else traces."""

    def __init__(
        self,
        path: str | Path,
        *,
        retrieval_tools: Iterable[str] = (),
        flatten: bool = False,
        steps: bool = False,
        sessions: bool = True,
    ) -> None:
        super().__init__(path)
        self.options = step_options(
            retrieval_tools, flatten=flatten, steps=steps, sessions=sessions
        )

    def _all_traces(self) -> list[SpanTrace]:
        traces: dict[str, SpanTrace] = {}
        said: dict[str, tuple[str | None, str | None]] = {}  # OTLP: the trace's own input/output
        seen: str | None = None
        for line, record in self._items():
            found = record_shape(record)
            if found is None:
                got = "" if isinstance(record, dict) else f", got {kind(record)}"
                raise self._error(line, SHAPES + got)
            if seen not in (None, found):
                raise self._error(line, f"{SHAPES} (not two of them in one file)")
            seen = found
            try:
                for trace in self._whole_traces(found, line, record):
                    if trace.id in traces:
                        raise self._error(line, f"duplicate row id {trace.id!r}")
                    traces[trace.id] = trace
                for span, said_in, said_out in self._spans_of(found, line, record):
                    trace = traces.setdefault(span.trace_id, SpanTrace(span.trace_id, line, []))
                    trace.spans.append(span)
                    if said_in is not None or said_out is not None:
                        said[span.trace_id] = (said_in, said_out)
            except CellError as exc:
                raise self._error(line, str(exc)) from None
        for trace_id, (said_in, said_out) in said.items():
            traces[trace_id] = dataclasses.replace(traces[trace_id], input=said_in, output=said_out)
        return list(traces.values())

    def _whole_traces(self, found: str, line: int, record: dict[str, Any]) -> list[SpanTrace]:
        if found == "trace":
            return [trace_of(record, line)]
        if found != "session":
            return []
        session = record.get("id")
        whole = []
        for i, item in enumerate(record["traces"]):
            if not isinstance(item, dict):
                raise CellError(f"session {session}: traces[{i}]: expected an object")
            trace = trace_of(item, line)
            if trace.session is None and isinstance(session, str) and session:
                trace = dataclasses.replace(trace, session=session)
            whole.append(trace)
        return whole

    def _spans_of(
        self, found: str, line: int, record: dict[str, Any]
    ) -> Iterator[tuple[Span, str | None, str | None]]:
        if found == "otlp":
            yield from otlp_spans(record, line)
        elif found == "observation":
            trace_id = record.get("traceId", record.get("trace_id"))
            yield observation_span(record, trace_id, line, ""), None, None
