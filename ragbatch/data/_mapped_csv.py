"""Your own CSV columns → rows: ``--format csv --mapping question=query,...`` (file I/O).

Columns are named by a mapping (:func:`parse_mapping`); ``question``, ``answer`` and
``contexts`` default to columns of those names; the contexts cell is a JSON array of strings
or ``{id, text, source, authority}`` objects (ids default to ``c<n>``). Unmapped columns are
ignored. An empty optional cell (id, referenceAnswer, traceId, metadata) is absent; empty
contexts are none.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ragbatch.core import ConfigError, Row
from ragbatch.data._records import RecordReader, cell, parse_contexts

__all__ = ["MAPPING_FIELDS", "CsvReader", "parse_mapping", "resolve_mapping"]

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
            id=cells.get("id") or self.fallback_id,
            question=cells["question"],
            contexts=parse_contexts(column, cell(record, column, True, list, False)),
            answer=cells["answer"],
            reference_answer=cells.get("referenceAnswer") or None,
            trace_id=cells.get("traceId") or None,
            metadata=metadata or None,
        )
