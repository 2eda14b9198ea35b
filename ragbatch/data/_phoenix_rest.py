"""A trace's spans as Phoenix's REST API gives them -> the row or trace they are (pure).

``GET /v1/projects/{project}/spans`` answers span records of the shape ``Client().spans
.get_spans()`` returns (``context.trace_id``, ``context.span_id``, ``parent_id``,
``span_kind``, ``attributes`` with dotted names, ``start_time``, ``end_time``): the records a
Phoenix spans export holds, which ``--format openinference`` reads
(:func:`~ragbatch.data._openinference.phoenix_span`). :func:`trace_item` reads one trace's
records with that reader's code, into the row or multi-step trace the file reader would make
of the same trace (docs/semantics.md §8). Sessions are not joined: a live trace is judged when
it is complete, and a conversation never is (each turn's trace is judged alone, its
``session.id`` kept).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from ragbatch.core import Row, Trace
from ragbatch.data._base import describe
from ragbatch.data._openinference import phoenix_span
from ragbatch.data._records import CellError
from ragbatch.data._steps import step_options
from ragbatch.data._trace_spans import group_item
from ragbatch.data._traces import Trace as SpanTrace


class TraceUnreadable(ValueError):
    """A trace whose spans make no row or trace (the message says why, naming the trace)."""


def trace_item(
    trace_id: str,
    records: Sequence[Mapping[str, Any]],
    *,
    retrieval_tools: Iterable[str] = (),
    flatten: bool = False,
    steps: bool = False,
) -> Row | Trace:
    """The row or trace one trace's span records are, as ``--format openinference`` reads
    them (``records`` in the order Phoenix stored them); TraceUnreadable if they are none."""
    try:
        spans = [phoenix_span(dict(record), n) for n, record in enumerate(records, 1)]
        options = step_options(retrieval_tools, flatten=flatten, steps=steps, sessions=False)
        return group_item([SpanTrace(trace_id, 1, spans)], options)
    except CellError as exc:
        raise TraceUnreadable(f"trace {trace_id}: {exc}") from None
    except ValidationError as exc:
        raise TraceUnreadable(f"trace {trace_id}: {describe(exc, ignore_hint=False)}") from None
