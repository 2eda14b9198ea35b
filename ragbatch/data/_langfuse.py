"""Langfuse traces → rows, one per trace (file I/O).

Shapes read (told apart by the first record):

- traces with their observations: a trace's "Download JSON" (one ``.json`` document, parsed
  whole; ``{trace, observations}`` or the trace with ``observations`` inside), a JSON array
  or JSON lines of such traces, or an API list page ``{"data": [...]}`` (parsed whole). A
  trace has ``id``, ``input``, ``output`` and ``observations[]`` with ``id``, ``type``,
  ``name``, ``parentObservationId``, ``input`` and ``output``;
- observations alone (an observations export, one a record, ``traceId`` or ``trace_id``,
  ``parentObservationId`` or ``parent_observation_id``; Langfuse 5.x's observations v2
  pages ``{"data": [...], "meta": ...}`` and their items as JSON lines, whose inputs and
  outputs are JSON *strings*, decoded here): grouped by trace, so one trace's observations
  must be consecutive.

Mapping (then :mod:`ragbatch.data._traces`): an observation of type ``GENERATION`` is the LLM
span; the retriever is the first ``RETRIEVER`` observation, else the first ``SPAN`` whose name
contains "retriev" (as LangChain's callback names them). The retriever's output holds the
documents: a list (or ``{"documents": [...]}``) of strings or objects with the text in
``page_content``, ``content`` or ``text``, an optional ``id`` (else ``metadata.id``) and
``metadata.source``. The trace's own input/output come before the root observation's.
Inputs and outputs that are objects are unwrapped when they hold one string
(``{"query": "..."}``) or a message's ``content``; other JSON is not text and never judged
(the question then comes from the next place, at last a generation's last user message).
Span ids: ``root`` is the one
top-level observation (none when there are several), ``retriever`` and ``llm`` the
observations used; the trace id is the row's id and traceId.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import chain
from pathlib import Path
from typing import Any

from ragbatch.core import ConfigError
from ragbatch.data._records import CellError, kind
from ragbatch.data._traces import (
    Document,
    Span,
    Trace,
    TraceReader,
    decoded,
    document,
    group_traces,
    instant,
)

EXPECTED = (
    "expected a Langfuse export: traces with id, input, output and observations[] (type "
    "SPAN/GENERATION/EVENT, name, input, output), or observations with traceId"
)
KINDS = {"GENERATION": "LLM", "RETRIEVER": "RETRIEVER"}
TEXT_KEYS = ("page_content", "pageContent", "content", "text")


def text(value: Any) -> str | None:
    """An input/output as text: a string as it is, one string or a message's content
    unwrapped; any other JSON is not text (None: never judged as its JSON)."""
    value = decoded(value)
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, dict):
        if isinstance(value.get("content"), str):
            return str(value["content"])
        if len(value) == 1 and isinstance(next(iter(value.values())), str):
            return str(next(iter(value.values())))
    return None


def last_user_message(value: Any) -> str | None:
    """The last ``user`` message's text content in a generation's input message list."""
    value = decoded(value)
    if isinstance(value, dict):
        value = value.get("messages")
    if not isinstance(value, list):
        return None
    users = [m.get("content") for m in value if isinstance(m, dict) and m.get("role") == "user"]
    return next((c for c in reversed(users) if isinstance(c, str)), None)


def documents(output: Any, where: str) -> list[Document]:
    """The documents a retriever observation returned."""
    output = decoded(output)
    if isinstance(output, dict) and "documents" in output:
        output = output["documents"]
    if output is None:
        return []
    if not isinstance(output, list):
        raise CellError(f"{where}output: expected a list of documents, got {kind(output)}")
    found: list[Document] = []
    for rank, item in enumerate(output):
        if isinstance(item, str):
            found.append(Document(rank=rank, id=None, content=item))
            continue
        if not isinstance(item, dict):
            raise CellError(f"{where}output[{rank}]: expected a document, got {kind(item)}")
        content = next((item[k] for k in TEXT_KEYS if k in item), None)
        fields = {"id": item.get("id"), "content": content, "metadata": item.get("metadata")}
        found.append(document(rank, fields, f"{where}output[{rank}]: "))
    return found


def calls_tools(output: Any) -> bool:
    """Whether a generation's output message calls tools (then it is not an answer)."""
    output = decoded(output)
    return isinstance(output, dict) and bool(output.get("tool_calls"))


def _field(record: dict[str, Any], *names: str) -> Any:
    return next((record[n] for n in names if record.get(n) is not None), None)


def observation_span(record: dict[str, Any], trace_id: Any, line: int, where: str) -> Span:
    """One observation as a span; its documents are read if it may be the retriever."""
    obs_id = record.get("id")
    if not (isinstance(trace_id, str) and trace_id):
        raise CellError(f"{where}traceId: expected a non-empty string, got {kind(trace_id)}")
    if not (isinstance(obs_id, str) and obs_id):
        raise CellError(f"{where}id: expected a non-empty string, got {kind(obs_id)}")
    obs_type = str(record.get("type") or "").upper()
    name = str(record.get("name") or "")
    is_retriever = obs_type == "RETRIEVER" or (obs_type == "SPAN" and "retriev" in name.lower())
    parent = _field(record, "parentObservationId", "parent_observation_id")
    session = _field(record, "sessionId", "session_id")
    return Span(
        trace_id=trace_id,
        id=obs_id,
        line=line,
        parent=parent if isinstance(parent, str) and parent else None,
        kind=KINDS.get(obs_type, "RETRIEVER" if is_retriever else obs_type),
        input=text(record.get("input")),
        output=text(record.get("output")),
        documents=documents(record.get("output"), where) if is_retriever else [],
        user_message=last_user_message(record.get("input")) if obs_type == "GENERATION" else None,
        name=name,
        start=instant(_field(record, "startTime", "start_time")),
        data_input=decoded(record.get("input")),
        data_output=decoded(record.get("output")),
        session=session if isinstance(session, str) and session else None,
        is_root=record.get("isRootObservation") is True,
        calls_tools=calls_tools(record.get("output")),
    )


def trace_of(record: dict[str, Any], line: int) -> Trace:
    """A trace record (with its observations inside) as a :class:`Trace`."""
    trace = record["trace"] if isinstance(record.get("trace"), dict) else record
    trace_id = trace.get("id")
    if not (isinstance(trace_id, str) and trace_id):
        raise CellError(f"trace id: expected a non-empty string, got {kind(trace_id)}")
    observations = record.get("observations", trace.get("observations")) or []
    if not isinstance(observations, list):
        raise CellError(f"trace {trace_id}: observations: expected an array")
    spans: list[Span] = []
    for i, item in enumerate(observations):
        where = f"trace {trace_id}: observations[{i}]: "
        if not isinstance(item, dict):
            raise CellError(
                f"{where}expected an object, got {kind(item)} (export the trace with its "
                "observations, e.g. its Download JSON)"
            )
        spans.append(observation_span(item, _field(item, "traceId", "trace_id") or trace_id,
                                      line, where))  # fmt: skip
    session = trace.get("sessionId")
    return Trace(
        trace_id,
        line,
        spans,
        text(trace.get("input")),
        text(trace.get("output")),
        start=instant(trace.get("timestamp")),
        session=session if isinstance(session, str) and session else None,
    )


def shape(record: dict[str, Any]) -> str | None:
    """``trace`` or ``observation``, or None for neither."""
    if "observations" in record or isinstance(record.get("trace"), dict):
        return "trace"
    if _field(record, "traceId", "trace_id") is not None and "type" in record:
        return "observation"
    return None


class LangfuseReader(TraceReader):
    """Rows of a Langfuse trace or observation export, one per trace."""

    def __init__(self, path: str | Path) -> None:
        super().__init__(path)
        if self.path.suffix.lower() not in (".json", ".jsonl"):
            raise ConfigError(f"langfuse exports end in .json or .jsonl: {self.path.name!r}")

    def _items(self) -> Iterator[tuple[int, Any]]:
        for line, value in self._json_values():
            if isinstance(value, dict) and isinstance(value.get("data"), list):
                for item in value["data"]:  # an API list page: its items
                    yield line, item
            else:
                yield line, value

    def _traces(self) -> Iterator[Trace]:
        items = self._items()
        for line, record in items:
            if self._shape(line, record) == "trace":
                yield self._trace(line, record)
                for number, more in items:
                    yield self._trace(number, self._checked(number, more, "trace"))
            else:
                rest = ((n, self._checked(n, r, "observation")) for n, r in items)
                spans = self._observations(chain([(line, record)], rest))
                yield from group_traces(spans, self._error)
            return

    def _observations(self, records: Iterator[tuple[int, dict[str, Any]]]) -> Iterator[Span]:
        for line, record in records:
            try:
                yield observation_span(record, _field(record, "traceId", "trace_id"), line, "")
            except CellError as exc:
                raise self._error(line, str(exc)) from None

    def _shape(self, line: int, record: Any) -> str:
        found = shape(record) if isinstance(record, dict) else None
        if found is None:
            got = "" if isinstance(record, dict) else f", got {kind(record)}"
            raise self._error(line, EXPECTED + got)
        return found

    def _checked(self, line: int, record: Any, want: str) -> dict[str, Any]:
        if self._shape(line, record) != want:
            raise self._error(line, f"{EXPECTED} (not both in one file)")
        result: dict[str, Any] = record
        return result

    def _trace(self, line: int, record: dict[str, Any]) -> Trace:
        try:
            return trace_of(record, line)
        except CellError as exc:
            raise self._error(line, str(exc)) from None
