"""The dataset formats and :func:`open_dataset`, the one place a format name becomes a reader.

Every reader yields :class:`Row` and is a :class:`RowSource` (``name``, ``rows``, ``sha256``
of the bytes read, once exhausted):

- ``jsonl``: ragbatch's own rows (:mod:`ragbatch.data._jsonl`);
- ``ragas`` (JSON lines, a JSON array, CSV or Parquet; v0.2 or v0.1 column names): see
  ``ragas``;
- ``csv``: your own columns named by a mapping: see ``mapped_csv``;
- ``deepeval`` (a JSON array, JSON lines or CSV of test cases): see ``deepeval``;
- ``openinference`` (OTLP JSON, or a Phoenix spans export as JSON, JSON lines or Parquet;
  one row per trace): see ``openinference`` and ``traces``;
- ``langfuse`` (traces with their observations, or observations alone): see ``langfuse``;
- ``golden-yaml``: a golden-set YAML joined with a JSONL of outputs (GoldenYamlReader).

:func:`open_items` is the reader of rows *and* multi-step traces (docs/semantics.md §8), an
:class:`ItemSource` (``items()``): native trace lines, ragas multi-turn samples, deepeval
conversations, Langfuse and OpenInference traces and sessions become traces; a dataset without them gives
the very rows :func:`open_dataset` gives.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from ragbatch.core import ConfigError, Row, Trace
from ragbatch.data._base import ItemSource, RowSource
from ragbatch.data._jsonl import JsonlReader

if TYPE_CHECKING:
    from ragbatch.data._golden_yaml import Join

__all__ = ["FORMATS", "ItemSource", "RowSource", "open_dataset", "open_items"]

FORMATS: tuple[str, ...] = ("jsonl", "ragas", "csv", "golden-yaml", "deepeval", "openinference",
                           "langfuse")  # fmt: skip
TRACE_FORMATS: tuple[str, ...] = ("jsonl", "ragas", "deepeval", "langfuse", "openinference")


def open_dataset(
    path: str | Path,
    format: str,
    *,
    mapping: Mapping[str, str] | str | None = None,
    outputs: str | Path | None = None,
    ignore_unknown_fields: bool = False,
    join: Join = "auto",
) -> RowSource:
    """The reader for ``format``; for ``golden-yaml`` ``path`` is the YAML, ``outputs`` the JSONL."""
    if format not in FORMATS:
        raise ConfigError(f"unknown dataset format {format!r}; choose from {', '.join(FORMATS)}")
    if mapping is not None and format != "csv":
        raise ConfigError(f"a column mapping applies only to format 'csv', not {format!r}")
    if outputs is not None and format != "golden-yaml":
        raise ConfigError(f"an outputs file applies only to format 'golden-yaml', not {format!r}")
    if format == "jsonl":
        return JsonlReader(path, ignore_unknown_fields=ignore_unknown_fields)
    # The foreign formats' readers are imported when asked for (start-up of a JSONL run).
    if format == "ragas":
        from ragbatch.data._ragas import RagasReader

        return RagasReader(path)
    if format == "deepeval":
        from ragbatch.data._deepeval import DeepevalReader

        return DeepevalReader(path)
    if format == "openinference":
        from ragbatch.data._openinference import OpenInferenceReader

        return OpenInferenceReader(path)
    if format == "langfuse":
        from ragbatch.data._langfuse import LangfuseReader

        return LangfuseReader(path)
    if format == "csv":
        from ragbatch.data._mapped_csv import CsvReader, parse_mapping

        return CsvReader(path, parse_mapping(mapping) if isinstance(mapping, str) else mapping)
    if outputs is None:
        raise ConfigError("format 'golden-yaml' needs outputs: the JSONL of system outputs")
    from ragbatch.data._golden_yaml import GoldenYamlReader

    return GoldenYamlReader(path, outputs, join, ignore_unknown_fields=ignore_unknown_fields)


class RowItems:
    """A row source as an item source: its rows, as they are (formats without traces)."""

    def __init__(self, source: RowSource) -> None:
        self.source = source

    @property
    def rows(self) -> int:
        return self.source.rows

    @property
    def name(self) -> str:
        return self.source.name

    @property
    def sha256(self) -> str:
        return self.source.sha256

    def items(self) -> Iterator[Row | Trace]:
        return iter(self.source)


def open_items(
    path: str | Path,
    format: str,
    *,
    mapping: Mapping[str, str] | str | None = None,
    outputs: str | Path | None = None,
    ignore_unknown_fields: bool = False,
    join: Join = "auto",
    retrieval_tools: Iterable[str] = (),
    flatten: bool = False,
    steps: bool = False,
) -> ItemSource:
    """The reader of rows and multi-step traces for ``format`` (docs/semantics.md §8): as
    :func:`open_dataset`, and ``retrieval_tools`` (tools read as retrieval steps),
    ``flatten`` (every trace as its one-row view) and ``steps`` (every span trace as a
    trace, even one a single-turn reader reads as a row)."""
    from ragbatch.data._steps import step_options

    names = step_options(retrieval_tools, flatten=flatten, steps=steps).retrieval_tools
    if mapping is not None or outputs is not None or format not in TRACE_FORMATS:
        source = open_dataset(path, format, mapping=mapping, outputs=outputs,
                              ignore_unknown_fields=ignore_unknown_fields, join=join)  # fmt: skip
        return RowItems(source)
    if format == "jsonl":
        from ragbatch.data._native import TraceJsonlReader

        return TraceJsonlReader(path, ignore_unknown_fields=ignore_unknown_fields, flatten=flatten)
    if format == "ragas":
        from ragbatch.data._trace_ragas import RagasTraceReader

        return RagasTraceReader(path, retrieval_tools=names, flatten=flatten, steps=steps)
    if format == "deepeval":
        from ragbatch.data._trace_deepeval import DeepevalTraceReader

        return DeepevalTraceReader(path, retrieval_tools=names, flatten=flatten, steps=steps)
    if format == "langfuse":
        from ragbatch.data._trace_langfuse import LangfuseTraceReader

        return LangfuseTraceReader(path, retrieval_tools=names, flatten=flatten, steps=steps)
    from ragbatch.data._trace_openinference import OpenInferenceTraceReader

    return OpenInferenceTraceReader(path, retrieval_tools=names, flatten=flatten, steps=steps)
