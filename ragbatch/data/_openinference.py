"""OpenInference spans → rows, one per trace (file I/O): OTLP JSON and Phoenix exports.

Two shapes, told apart by the first record:

- OTLP JSON (``resourceSpans[].scopeSpans[].spans[]``, each span with ``traceId``,
  ``spanId``, ``parentSpanId`` and ``attributes`` as ``[{key, value: {stringValue, ...}}]``):
  a ``.json`` file that is one export request (parsed whole), or JSON lines of requests
  (what the OpenTelemetry collector's file exporter writes; streamed line by line);
- a Phoenix spans export: ``Client().spans.get_spans()`` dumped as a JSON array, or
  ``Client().spans.get_spans_dataframe()`` written with ``to_json(orient="records",
  lines=True)`` or ``to_parquet``: one span a record with ``context.trace_id``,
  ``context.span_id``, ``parent_id``, ``span_kind`` and ``attributes.*`` (nested objects are
  read the same as dotted names). Parquet needs pyarrow (``pip install
  'ragbatch[parquet]'``) and is read a batch at a time; its "line" is the 1-based row number.

Trace and span ids are hex, as OTLP/JSON, Phoenix and Langfuse write them; protobuf's
``MessageToJson`` writes them base64, and they are turned into hex here.

Attributes read: ``openinference.span.kind`` (CHAIN/RETRIEVER/LLM/...), ``input.value`` /
``output.value`` (with ``input.mime_type`` / ``output.mime_type``: only text is judged, see
:mod:`ragbatch.data._traces`), ``llm.input_messages`` / ``llm.output_messages`` (the last
user and assistant ``message.content``) and ``retrieval.documents.N.document.{id,content,
score,metadata}`` (flattened, ``metadata.source`` as its own key, or the list Phoenix keeps in
one column). Spans become rows by :mod:`ragbatch.data._traces`.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ragbatch.core import ConfigError
from ragbatch.data._records import CellError, kind
from ragbatch.data._tool_calls import answered_call, call_arguments, llm_tool_calls, tool_output
from ragbatch.data._traces import (
    Document,
    Span,
    TraceReader,
    decoded,
    document,
    flatten,
    instant,
    text_value,
)

SUFFIXES = (".json", ".jsonl", ".parquet")
EXPECTED = (
    "expected an OTLP JSON export (resourceSpans[].scopeSpans[].spans[]) or a Phoenix spans "
    "export (columns context.trace_id, context.span_id, attributes.*)"
)
_DOCUMENT_KEY = re.compile(r"retrieval\.documents\.(\d+)\.document\.(\w+)(?:\.(.+))?")
_MESSAGE_KEY = re.compile(r"llm\.(input|output)_messages\.(\d+)\.message\.(role|content)")
_HEX = re.compile(r"[0-9a-fA-F]+")


def any_value(value: Any) -> Any:
    """An OTLP ``AnyValue`` (``{"stringValue": "x"}``, ``{"intValue": "3"}``, ...) as Python."""
    if not isinstance(value, dict):
        return None
    for key in ("stringValue", "boolValue", "doubleValue", "bytesValue"):
        if key in value:
            return value[key]
    if "intValue" in value:
        try:
            return int(value["intValue"])  # a string in proto3 JSON
        except (TypeError, ValueError):
            return None
    if "arrayValue" in value:
        return [any_value(v) for v in (value["arrayValue"] or {}).get("values") or []]
    if "kvlistValue" in value:
        return attributes((value["kvlistValue"] or {}).get("values") or [])
    return None


def attributes(items: Any) -> dict[str, Any]:
    """OTLP ``[{key, value}]`` attributes as a dict (items without a string key skipped)."""
    if not isinstance(items, list):
        return {}
    return {
        item["key"]: any_value(item.get("value"))
        for item in items
        if isinstance(item, dict) and isinstance(item.get("key"), str)
    }


def documents(attrs: dict[str, Any], where: str) -> list[Document]:
    """The retrieved documents in ``attrs``: flattened keys or one ``retrieval.documents``
    list of ``{"document.content": ...}`` / ``{"document": {"content": ...}}`` objects."""
    by_rank: dict[int, dict[str, Any]] = {}
    for key, value in attrs.items():
        if match := _DOCUMENT_KEY.fullmatch(key):
            fields = by_rank.setdefault(int(match[1]), {})
            if match[3] is None:
                fields[match[2]] = value
            elif isinstance(fields.setdefault(match[2], {}), dict):  # metadata.source: ...
                fields[match[2]][match[3]] = value
    listed = attrs.get("retrieval.documents")
    if isinstance(listed, list):
        for rank, item in enumerate(listed):
            if not isinstance(item, dict):
                raise CellError(
                    f"{where}retrieval.documents.{rank}: expected an object, got {kind(item)}"
                )
            nested = item.get("document")
            by_rank[rank] = (
                nested
                if isinstance(nested, dict)
                else {k.removeprefix("document."): v for k, v in item.items()}
            )
    elif listed is not None:
        raise CellError(f"{where}retrieval.documents: expected an array, got {kind(listed)}")
    return [document(rank, by_rank[rank], where) for rank in sorted(by_rank)]


def hex_id(value: Any, size: int) -> Any:
    """A trace (16 bytes) or span (8 bytes) id as lowercase hex: hex as it is, protobuf
    JSON's base64 decoded; anything else unchanged (checked by the caller)."""
    if not isinstance(value, str) or not value:
        return value
    if len(value) == 2 * size and _HEX.fullmatch(value):
        return value.lower()
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return value
    return raw.hex() if len(raw) == size else value


def last_message(attrs: dict[str, Any], direction: str, role: str) -> str | None:
    """The content of the last ``role`` message among an LLM span's input or output messages
    (flattened keys, or the list Phoenix keeps in one column)."""
    messages: dict[int, dict[str, Any]] = {}
    for key, value in attrs.items():
        if (match := _MESSAGE_KEY.fullmatch(key)) and match[1] == direction:
            messages.setdefault(int(match[2]), {})[match[3]] = value
    listed = attrs.get(f"llm.{direction}_messages")
    if isinstance(listed, list):
        for n, item in enumerate(listed):
            if isinstance(item, dict):
                nested = item.get("message")
                fields = nested if isinstance(nested, dict) else item
                messages[n] = {k.removeprefix("message."): v for k, v in fields.items()}
    found = [m.get("content") for _, m in sorted(messages.items()) if m.get("role") == role]
    return next((c for c in reversed(found) if isinstance(c, str)), None)


def make_span(
    trace_id: Any,
    span_id: Any,
    parent: Any,
    kind_: Any,
    attrs: dict[str, Any],
    line: int,
    where: str,
    names: tuple[str, str] = ("traceId", "spanId"),
    *,
    name: Any = "",
    start: Any = None,
) -> Span:
    """A :class:`Span` from its ids and OpenInference attributes (CellError if unusable)."""
    trace_id, span_id, parent = hex_id(trace_id, 16), hex_id(span_id, 8), hex_id(parent, 8)
    for field, value in zip(names, (trace_id, span_id), strict=True):
        if not (isinstance(value, str) and value):
            raise CellError(f"{where}{field}: expected a non-empty string, got {kind(value)}")
    span_kind = attrs.get("openinference.span.kind") or kind_ or ""
    span_kind = span_kind.upper() if isinstance(span_kind, str) else ""
    output, session = attrs.get("output.value"), attrs.get("session.id")
    calls = llm_tool_calls(attrs)
    return Span(
        trace_id=trace_id,
        id=span_id,
        line=line,
        parent=parent if isinstance(parent, str) and parent else None,
        kind=span_kind,
        input=text_value(attrs.get("input.value"), attrs.get("input.mime_type")),
        output=text_value(output, attrs.get("output.mime_type")),
        documents=documents(attrs, where),
        user_message=last_message(attrs, "input", "user"),
        assistant_message=last_message(attrs, "output", "assistant"),
        name=named if isinstance(named := attrs.get("tool.name") or name, str) else "",
        start=instant(start),
        data_input=decoded(attrs.get("input.value")),
        data_output=tool_output(output) if span_kind == "TOOL" else decoded(output),
        session=session if isinstance(session, str) and session else None,
        calls_tools=bool(calls),
        tool_calls=call_arguments(calls),
        tool_call_id=answered_call(output) if span_kind == "TOOL" else None,
    )


def otlp_span_objects(request: dict[str, Any]) -> Iterator[tuple[dict[str, Any], str]]:
    """Every span object of one OTLP export request, in file order, with where it stands
    (``resourceSpans[i].scopeSpans[j].spans[k]: ``); a CellError for a bad shape."""
    resource_spans = request.get("resourceSpans")
    if not isinstance(resource_spans, list):
        raise CellError(f"resourceSpans: expected an array, got {kind(resource_spans)}")
    for i, resource in enumerate(resource_spans):
        scopes = resource.get("scopeSpans") if isinstance(resource, dict) else None
        if not isinstance(scopes, list):
            raise CellError(f"resourceSpans[{i}].scopeSpans: expected an array, got {kind(scopes)}")
        for j, scope in enumerate(scopes):
            items = scope.get("spans") if isinstance(scope, dict) else None
            if not isinstance(items, list):
                where = f"resourceSpans[{i}].scopeSpans[{j}].spans"
                raise CellError(f"{where}: expected an array, got {kind(items)}")
            for k, span in enumerate(items):
                where = f"resourceSpans[{i}].scopeSpans[{j}].spans[{k}]: "
                if not isinstance(span, dict):
                    raise CellError(f"{where}expected an object, got {kind(span)}")
                yield span, where


def otlp_spans(request: dict[str, Any], line: int) -> list[Span]:
    """The spans of one OTLP export request, each trace's spans together (first seen first)."""
    spans: list[Span] = []
    for span, where in otlp_span_objects(request):
        attrs = attributes(span.get("attributes"))
        spans.append(make_span(span.get("traceId"), span.get("spanId"),
                               span.get("parentSpanId"), None, attrs, line, where,
                               name=span.get("name"),
                               start=span.get("startTimeUnixNano")))  # fmt: skip
    order = {trace: n for n, trace in reversed(list(enumerate(s.trace_id for s in spans)))}
    return sorted(spans, key=lambda s: order[s.trace_id])


def phoenix_span(record: dict[str, Any], line: int) -> Span:
    """One span of a Phoenix spans export (a DataFrame row, flat or nested)."""
    flat = flatten(record)
    attrs = {k[11:]: v for k, v in flat.items() if k.startswith("attributes.")}
    return make_span(flat.get("context.trace_id"), flat.get("context.span_id"),
                     flat.get("parent_id"), flat.get("span_kind"), attrs, line, "",
                     ("context.trace_id", "context.span_id"), name=flat.get("name"),
                     start=flat.get("start_time"))  # fmt: skip


class OpenInferenceReader(TraceReader):
    """Rows of an OTLP JSON or Phoenix spans export, one per trace."""

    def __init__(self, path: str | Path) -> None:
        super().__init__(path)
        if self.path.suffix.lower() not in SUFFIXES:
            raise ConfigError(
                f"openinference exports end in .json, .jsonl or .parquet: {self.path.name!r}"
            )

    def _spans(self) -> Iterator[Span]:
        records = self._parquet() if self.path.suffix.lower() == ".parquet" else self._json_values()
        shape: str | None = None
        for line, record in records:
            if not isinstance(record, dict):
                raise self._error(line, f"{EXPECTED}, got {kind(record)}")
            found = "otlp" if "resourceSpans" in record else None
            if found is None and "context.trace_id" in flatten(record):
                found = "phoenix"
            if found is None or (shape is not None and found != shape):
                raise self._error(line, EXPECTED)
            shape = found
            try:
                if found == "otlp":
                    yield from otlp_spans(record, line)
                else:
                    yield phoenix_span(record, line)
            except CellError as exc:
                raise self._error(line, str(exc)) from None
