"""ragbatch's own JSONL with multi-step traces: a line with ``steps`` is a :class:`Trace`
(docs/semantics.md §8), any other line a :class:`Row` exactly as :class:`JsonlReader` reads
it; and the native line of either, as ``ragbatch parse`` prints them (file I/O).

A trace line is told apart by its ``steps`` key alone, so a row line gives the same row and
the same error message as before. A trace's errors name the line and the field in the
file's own words (``steps[1].contexts[0].id``), as a row's do.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from ragbatch.core import Row, Trace
from ragbatch.data._jsonl import JsonlReader

__all__ = ["TraceJsonlReader", "native_line", "parse_item", "trace_line"]


def is_trace_line(data: Any) -> bool:
    """A native line is a trace when it is an object with ``steps``."""
    return isinstance(data, dict) and "steps" in data


def parse_item(raw: bytes, *, ignore_unknown_fields: bool = False) -> Row | Trace:
    """One native JSONL line: a :class:`Trace` when it has ``steps``, else a :class:`Row`
    (pydantic's ValidationError for a bad one; :func:`describe` words it)."""
    if b'"steps"' not in raw:  # no trace: a row, parsed once (the hot path of a JSONL run)
        return parse_row(raw, ignore_unknown_fields)
    try:
        data: Any = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return Row.model_validate_json(raw)  # the row's own message for invalid JSON
    model: type[Row] | type[Trace] = Trace if is_trace_line(data) else Row
    if not ignore_unknown_fields:
        return model.model_validate_json(raw)
    if isinstance(data, dict):
        known = {f.alias or name for name, f in model.model_fields.items()}
        data = {k: v for k, v in data.items() if k in known}
    return model.model_validate_json(orjson.dumps(data))


def parse_row(raw: bytes, ignore_unknown_fields: bool) -> Row:
    """One JSONL line as a row (unknown top-level fields dropped first when asked)."""
    if not ignore_unknown_fields:
        return Row.model_validate_json(raw)
    try:
        data: Any = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return Row.model_validate_json(raw)  # the row's own message for invalid JSON
    if isinstance(data, dict):
        known = {f.alias or name for name, f in Row.model_fields.items()}
        data = {k: v for k, v in data.items() if k in known}
    return Row.model_validate_json(orjson.dumps(data))


def trace_line(trace: Trace) -> bytes:
    """A trace as its native JSONL line (camelCase, nulls left out, ending in a newline);
    ``expected.firstFailingStep: null`` is kept, since it is a label ("no step fails")."""
    data = trace.model_dump(mode="json", by_alias=True, exclude_none=True)
    if trace.expected is not None and trace.expected.labels_first_failing_step:
        data["expected"]["firstFailingStep"] = trace.expected.first_failing_step
    return orjson.dumps(data) + b"\n"


def native_line(item: Row | Trace) -> bytes:
    """A row's or a trace's native JSONL line, ending in a newline."""
    if isinstance(item, Trace):
        return trace_line(item)
    return item.model_dump_json(by_alias=True, exclude_none=True).encode() + b"\n"


class TraceJsonlReader(JsonlReader):
    """:class:`JsonlReader` that also reads traces: ``items()`` yields rows and traces in
    file order (``flatten``: a trace's one-row view instead); iterating it yields rows only
    (a trace line is then an error, as before)."""

    def __init__(
        self, path: str | Path, *, ignore_unknown_fields: bool = False, flatten: bool = False
    ) -> None:
        super().__init__(path, ignore_unknown_fields=ignore_unknown_fields)
        self.flatten = flatten

    def _item(self, raw: bytes) -> Row | Trace:
        item = parse_item(raw, ignore_unknown_fields=self.ignore_unknown_fields)
        if self.flatten and isinstance(item, Trace):
            from ragbatch.data._steps import flat_row  # the trace readers' module: on use

            return flat_row(item)
        return item

    def items(self) -> Iterator[Row | Trace]:
        """Every row and trace of the file, in order; DatasetError on the first bad line."""
        return self._parsed(self._item)
