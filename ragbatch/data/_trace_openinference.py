"""OpenInference spans → traces of steps (file I/O), one a trace or a session.

Reads what :class:`OpenInferenceReader` reads (OTLP JSON, Phoenix's ``get_spans`` JSON and
its dataframe as JSON lines or Parquet), with each span's name, start time (OTLP's
``startTimeUnixNano``, Phoenix's ``start_time``), ``session.id``, ``tool.name`` and the tool
calls of LLM replies (:mod:`ragbatch.data._tool_calls`). A trace's spans may be anywhere in
the file: it is read whole. Steps, turns, sessions and rows: :mod:`ragbatch.data._trace_spans`
(RETRIEVER spans with their documents, TOOL spans, the last LLM reply that calls no tool).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from ragbatch.data._openinference import OpenInferenceReader
from ragbatch.data._steps import step_options
from ragbatch.data._trace_spans import SpanTraceReader
from ragbatch.data._traces import Trace as SpanTrace


class OpenInferenceTraceReader(OpenInferenceReader, SpanTraceReader):
    """An OpenInference export's traces and sessions: rows where a trace is one, else traces."""

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
        for span in self._spans():
            trace = traces.setdefault(span.trace_id, SpanTrace(span.trace_id, span.line, []))
            trace.spans.append(span)
        return list(traces.values())
