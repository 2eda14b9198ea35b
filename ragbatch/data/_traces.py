"""Traces → rows: the mapping shared by the OpenInference and Langfuse readers (file I/O).

A trace is its spans (Langfuse: observations) in file order. One row per trace:

- the *root* is the trace's one span without a parent (none if there are several: Langfuse's
  top-level observations, a partial export); the *retriever* the first
  span of kind ``RETRIEVER``; the *llm* the last span of kind ``LLM`` (the answer is
  generated last);
- only plain text is judged, never a JSON document (a provider's whole response, a
  ``{"query": ..., "top_k": 3}`` input): a value is text when it is a string that is not
  JSON, or JSON holding one string (``"..."``, ``{"question": "..."}``);
- question: the retriever's input, else the trace's own (Langfuse), else the root's, else
  the LLM's last user message, else the text the root's traced function was called with;
  answer: the LLM's last assistant message, else its output, else the trace's, else the
  root's (a trace with neither is an error naming the trace);
- contexts: the retriever's documents in rank order; a document's id (or its metadata's
  ``id``) is the context id (else ``c<rank>``), its content the text, a string ``source``
  in its metadata the source; scores and other metadata are not judged and not kept;
- id and traceId: the trace id; spans: the root, retriever and llm span ids.

:func:`group_traces` groups a stream of spans by trace without holding the file: the spans
of one trace must be consecutive (a trace id met again after another trace is an error).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import closing
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson
from pydantic import ValidationError

from ragbatch.core import Context, Row, Spans
from ragbatch.data._base import SeenIds, describe
from ragbatch.data._records import CellError, RecordReader, kind


@dataclass(frozen=True, slots=True)
class Document:
    """One retrieved document of a retriever span, at its rank (0-based)."""

    rank: int
    id: str | None
    content: str
    source: str | None = None


@dataclass(frozen=True, slots=True)
class Span:
    """What a row needs of one span: ids, kind, input/output text and documents."""

    trace_id: str
    id: str
    line: int
    parent: str | None = None
    kind: str = ""
    input: str | None = None
    output: str | None = None
    documents: list[Document] = field(default_factory=list)
    user_message: str | None = None  # an LLM span's last user message
    assistant_message: str | None = None  # an LLM span's last assistant message
    # what the trace readers (multi-step, docs/semantics.md §8) read beside
    name: str = ""
    start: int | None = None  # nanoseconds since the epoch
    data_input: Any = None  # input and output as data (JSON text decoded)
    data_output: Any = None
    session: str | None = None
    is_root: bool = False  # marked the root by its tool (Langfuse), whatever its parent
    calls_tools: bool = False  # an LLM span whose reply calls tools
    tool_calls: tuple[tuple[str, Any], ...] = ()  # an LLM span's calls: (call id, arguments)
    tool_call_id: str | None = None  # the call a TOOL span answers, where it says


@dataclass(frozen=True, slots=True)
class Trace:
    id: str
    line: int  # the line of its first span
    spans: list[Span]
    input: str | None = None  # the trace's own input/output (Langfuse), before the root's
    output: str | None = None
    start: int | None = None  # the trace's own timestamp (Langfuse), in nanoseconds
    session: str | None = None  # the trace's own session id (Langfuse)


def decoded(value: Any) -> Any:
    """A value as data: Langfuse 5.x's observations API gives inputs and outputs as JSON
    *strings*; a string that parses as a JSON object, array or string is that JSON."""
    if isinstance(value, str) and value.lstrip().startswith(("{", "[", '"')):
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            return value
    return value


def text_value(value: Any, mime_type: Any = None) -> str | None:
    """An input/output value as text, or None when it is not text.

    A string is text unless it is JSON (by MIME type, or one that parses as a JSON object,
    array or string); JSON is text only when it holds one string (``"..."``,
    ``{"question": "..."}``). A JSON document (a provider response, a dict of parameters) is
    never judged as text."""
    if value is None:
        return None
    data = value
    if isinstance(value, str):
        if mime_type != "application/json" and not value.lstrip().startswith(("{", "[", '"')):
            return value
        try:
            data = orjson.loads(value)
        except orjson.JSONDecodeError:
            return value
    if isinstance(data, str):
        return data
    if isinstance(data, dict) and len(data) == 1:
        only = next(iter(data.values()))
        return only if isinstance(only, str) else None
    return None


def instant(value: Any) -> int | None:
    """A start time as nanoseconds since the epoch: OTLP's integer nanoseconds (a number or
    its digits), an ISO 8601 text (no zone: UTC) or a datetime; None when there is none."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    if isinstance(value, str) and value:
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            return None
    if isinstance(value, datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=UTC)
        delta = moment - datetime(1970, 1, 1, tzinfo=UTC)
        nanos: int = getattr(moment, "nanosecond", 0)  # a pandas Timestamp keeps nanoseconds
        return (delta.days * 86_400 + delta.seconds) * 10**9 + delta.microseconds * 1000 + nanos
    return None


def document(rank: int, fields: dict[str, Any], where: str) -> Document:
    """A document from its ``id``/``content``/``metadata`` fields (metadata: object or JSON)."""
    content, doc_id, metadata = fields.get("content"), fields.get("id"), fields.get("metadata")
    if not isinstance(content, str):
        raise CellError(
            f"{where}retrieval.documents.{rank}: content: expected a string, got {kind(content)}"
        )
    if isinstance(doc_id, bool) or not isinstance(doc_id, str | int | None):
        raise CellError(
            f"{where}retrieval.documents.{rank}: id: expected a string, got {kind(doc_id)}"
        )
    if isinstance(metadata, str):
        try:
            metadata = orjson.loads(metadata)
        except orjson.JSONDecodeError:
            metadata = None
    source = metadata.get("source") if isinstance(metadata, dict) else None
    if doc_id in (None, "") and isinstance(metadata, dict):
        doc_id = metadata.get("id")  # LangChain keeps a document's id in its metadata
        if isinstance(doc_id, bool) or not isinstance(doc_id, str | int | None):
            doc_id = None
    return Document(
        rank=rank,
        id=None if doc_id in (None, "") else str(doc_id),
        content=content,
        source=source if isinstance(source, str) and source else None,
    )


def group_traces(spans: Iterable[Span], error: Any) -> Iterator[Trace]:
    """Consecutive spans of one trace as a :class:`Trace`; ``error(line, message)`` for a
    trace whose spans are not together."""
    current: Trace | None = None
    with closing(SeenIds()) as done:
        for span in spans:
            if current is not None and span.trace_id == current.id:
                current.spans.append(span)
                continue
            if current is not None:
                done.add(current.id)
                yield current
            if not done.add(span.trace_id):
                raise error(
                    span.line,
                    f"trace {span.trace_id}: its spans are not together (another trace came "
                    "between them); sort the export by trace id",
                )
            current = Trace(span.trace_id, span.line, [span])
        if current is not None:
            yield current


def trace_row(trace: Trace) -> Row:
    """The row of one trace (see the module docstring); CellError if it has no question or
    answer."""
    ids = {s.id for s in trace.spans}
    roots = [s for s in trace.spans if s.parent is None or s.parent not in ids]
    root = roots[0] if len(roots) == 1 else None
    retriever = next((s for s in trace.spans if s.kind == "RETRIEVER"), None)
    llm = next((s for s in reversed(trace.spans) if s.kind == "LLM"), None)
    question = _first(
        retriever.input if retriever else None,
        trace.input,
        root.input if root else None,
        llm.user_message if llm else None,
        first_argument(root.data_input) if root else None,
    )
    answer = _first(
        llm.assistant_message if llm else None,
        llm.output if llm else None,
        trace.output,
        root.output if root else None,
    )
    if question is None:
        raise CellError(
            f"trace {trace.id}: no plain-text question (no text input on its RETRIEVER span "
            "or root, no user message on its LLM span)"
        )
    if answer is None:
        raise CellError(
            f"trace {trace.id}: no plain-text answer (no assistant message or text output on "
            "its LLM span, no text output on its root)"
        )
    documents = sorted(retriever.documents, key=lambda d: d.rank) if retriever else []
    contexts = [
        Context(id=d.id or f"c{i}", text=d.content, source=d.source)
        for i, d in enumerate(documents, start=1)
    ]
    return Row(
        id=trace.id,
        question=question,
        contexts=contexts,
        answer=answer,
        trace_id=trace.id,
        spans=Spans(
            root=root.id if root else None,
            retriever=retriever.id if retriever else None,
            llm=llm.id if llm else None,
        ),
    )


def first_argument(value: Any) -> str | None:
    """The text a traced function was called with (Langfuse's ``@observe`` records its
    input as ``{"args": [text], "kwargs": {}}``)."""
    args = value.get("args") if isinstance(value, dict) else None
    only = args[0] if isinstance(args, list) and len(args) == 1 else None
    return only if isinstance(only, str) else None


def _first(*values: str | None) -> str | None:
    return next((v for v in values if v is not None), None)


def flatten(record: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested objects as dotted keys (``{"context": {"trace_id": 1}}`` → ``context.trace_id``);
    arrays are kept as they are."""
    flat: dict[str, Any] = {}
    for key, value in record.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            flat.update(flatten(value, f"{name}."))
        else:
            flat[name] = value
    return flat


class TraceReader(RecordReader):
    """One row per trace of a span stream (``_spans``), spans grouped by :func:`group_traces`.

    A row's line is the line of its trace's first span; errors also name the trace id.
    """

    documents = True

    def _spans(self) -> Iterator[Span]:
        raise NotImplementedError

    def _traces(self) -> Iterator[Trace]:
        return group_traces(self._spans(), self._error)

    def __iter__(self) -> Iterator[Row]:
        with closing(SeenIds()) as ids:
            for trace in self._traces():
                try:
                    row = trace_row(trace)
                except CellError as exc:
                    raise self._error(trace.line, str(exc)) from None
                except ValidationError as exc:
                    message = describe(exc, ignore_hint=False)
                    raise self._error(trace.line, f"trace {trace.id}: {message}") from None
                yield self._admit(row, trace.line, ids)
        self._finish()
