"""Readers for other dataset formats, yielding :class:`Row` like DatasetReader (file I/O).

Same interface as DatasetReader (``path``, ``name``, ``rows``, ``sha256`` of the bytes read).

- ``ragas`` (JSON lines, a JSON array or CSV; v0.2 or v0.1 column names): see ``ragas``.
- ``csv``: columns named by a mapping (:func:`parse_mapping`); ``question``, ``answer`` and
  ``contexts`` default to columns of those names; the contexts cell is a JSON array of strings
  or ``{id, text, source, authority}`` objects (ids default to ``c<n>``).
- ``deepeval`` (a JSON array, JSON lines or CSV of test cases): see ``deepeval``.
- ``openinference`` (OTLP JSON, or a Phoenix spans export as JSON lines or Parquet; one row
  per trace): see ``openinference`` and ``traces``.
- ``langfuse`` (traces with their observations, or observations alone): see ``langfuse``.
- ``golden-yaml``: a golden-set YAML joined with a JSONL of outputs (GoldenYamlReader).

Unmapped CSV columns are ignored. In CSV an empty optional cell (id,
referenceAnswer, traceId, metadata) is absent; empty contexts are none.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeAlias

from ragbatch.core.errors import ConfigError
from ragbatch.core.schema import Row
from ragbatch.data.deepeval import DeepevalReader
from ragbatch.data.golden_yaml import GoldenYamlReader, Join
from ragbatch.data.jsonl import DatasetReader
from ragbatch.data.langfuse import LangfuseReader
from ragbatch.data.openinference import OpenInferenceReader
from ragbatch.data.ragas import RagasReader
from ragbatch.data.records import RecordReader, cell, parse_contexts

__all__ = [
    "FORMATS",
    "CsvReader",
    "DeepevalReader",
    "OpenInferenceReader",
    "RagasReader",
    "Reader",
    "open_dataset",
    "parse_mapping",
]

FORMATS: tuple[str, ...] = ("jsonl", "ragas", "csv", "golden-yaml", "deepeval", "openinference",
                           "langfuse")  # fmt: skip
MAPPING_FIELDS: tuple[str, ...] = ("id", "question", "answer", "contexts", "referenceAnswer",
                                   "traceId", "metadata.<name>")  # fmt: skip
CHOICES = ", ".join(MAPPING_FIELDS)
DEFAULT_MAPPING = {"question": "question", "answer": "answer", "contexts": "contexts"}
EXAMPLE = "question=query,answer=response,contexts=ctx"


def _check_field(field: str) -> None:
    if field not in MAPPING_FIELDS[:-1] and not (field.startswith("metadata.") and field[9:]):
        raise ConfigError(f"unknown mapping field {field!r}; choose from {CHOICES}")


def parse_mapping(text: str) -> dict[str, str]:
    """``"question=query,answer=response"`` → ``{"question": "query", "answer": "response"}``."""
    mapping: dict[str, str] = {}
    for item in (part.strip() for part in text.split(",")):
        field, eq, column = (part.strip() for part in item.partition("="))
        if not (eq and field and column):
            raise ConfigError(f"mapping item {item!r}: expected field=column, e.g. {EXAMPLE}")
        _check_field(field)
        if field in mapping:
            raise ConfigError(f"mapping field {field!r} is given twice")
        mapping[field] = column
    return mapping


def resolve_mapping(mapping: Mapping[str, str] | None) -> dict[str, str]:
    """The defaults for question/answer/contexts, overridden by ``mapping`` (fields checked)."""
    for field in mapping or {}:
        _check_field(field)
    return {**DEFAULT_MAPPING, **(mapping or {})}


class CsvReader(RecordReader):
    """Rows of a CSV file whose columns are named by ``mapping`` (ragbatch field → column)."""

    from_csv = True

    def __init__(self, path: str | Path, mapping: Mapping[str, str] | None = None) -> None:
        super().__init__(path)
        self.mapping = resolve_mapping(mapping)

    def _check_columns(self, line: int, columns: list[str]) -> None:
        if missing := [f"{c!r} (for {f})" for f, c in self.mapping.items() if c not in columns]:
            header = f"the header has {', '.join(columns)}"
            raise self._error(line, f"missing column(s) {', '.join(missing)}; {header}")

    def _row(self, line: int, record: dict[str, Any]) -> Row:
        cells: dict[str, str] = {field: record[column] for field, column in self.mapping.items()}
        column = self.mapping["contexts"]
        metadata = {f[9:]: v for f, v in cells.items() if f.startswith("metadata.") and v}
        return Row(
            id=cells.get("id") or f"row-{line}",
            question=cells["question"],
            contexts=parse_contexts(column, cell(record, column, True, list, False)),
            answer=cells["answer"],
            reference_answer=cells.get("referenceAnswer") or None,
            trace_id=cells.get("traceId") or None,
            metadata=metadata or None,
        )


Reader: TypeAlias = DatasetReader | GoldenYamlReader  # RagasReader, CsvReader: DatasetReaders


def open_dataset(
    path: str | Path,
    format: str,
    *,
    mapping: Mapping[str, str] | str | None = None,
    outputs: str | Path | None = None,
    ignore_unknown_fields: bool = False,
    join: Join = "auto",
) -> Reader:
    """The reader for ``format``; for ``golden-yaml`` ``path`` is the YAML, ``outputs`` the JSONL."""
    if format not in FORMATS:
        raise ConfigError(f"unknown dataset format {format!r}; choose from {', '.join(FORMATS)}")
    if mapping is not None and format != "csv":
        raise ConfigError(f"a column mapping applies only to format 'csv', not {format!r}")
    if outputs is not None and format != "golden-yaml":
        raise ConfigError(f"an outputs file applies only to format 'golden-yaml', not {format!r}")
    if format == "jsonl":
        return DatasetReader(path, ignore_unknown_fields=ignore_unknown_fields)
    if format == "ragas":
        return RagasReader(path)
    if format == "deepeval":
        return DeepevalReader(path)
    if format == "openinference":
        return OpenInferenceReader(path)
    if format == "langfuse":
        return LangfuseReader(path)
    if format == "csv":
        return CsvReader(path, parse_mapping(mapping) if isinstance(mapping, str) else mapping)
    if outputs is None:
        raise ConfigError("format 'golden-yaml' needs outputs: the JSONL of system outputs")
    return GoldenYamlReader(path, outputs, join, ignore_unknown_fields=ignore_unknown_fields)
