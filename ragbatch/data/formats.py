"""Readers for other dataset formats, yielding :class:`Row` like DatasetReader (file I/O).

Same interface as DatasetReader (``path``, ``name``, ``rows``, ``sha256`` of the bytes read).

- ``ragas`` (``.jsonl``/``.json`` lines or ``.csv``): ``user_input`` → question,
  ``retrieved_contexts`` (strings; in CSV a JSON array or pandas' Python list literal) →
  contexts ``c1``, ``c2``, ..., ``response`` → answer, optional ``reference``, ``id`` (else
  ``row-<line>``) and ``reference_contexts`` → expectedDocuments (:func:`expected_documents`).
- ``csv``: columns named by a mapping (:func:`parse_mapping`); ``question``, ``answer`` and
  ``contexts`` default to columns of those names; the contexts cell is a JSON array of strings
  or ``{id, text, source, authority}`` objects (ids default to ``c<n>``).
- ``golden-yaml``: a golden-set YAML joined with a JSONL of outputs (GoldenYamlReader).

Unknown ragas and unmapped CSV columns are ignored. In CSV an empty optional cell (id,
referenceAnswer, traceId, metadata, reference_contexts) is absent; empty contexts are none.
"""

from __future__ import annotations

import ast
import csv
from collections.abc import Iterator, Mapping
from contextlib import closing
from pathlib import Path
from typing import Any, TypeAlias

import orjson
from pydantic import ValidationError

from ragbatch.core.errors import ConfigError
from ragbatch.core.schema import Context, Golden, Row
from ragbatch.data.golden_yaml import GoldenYamlReader, Join, expected_documents
from ragbatch.data.jsonl import BOM, JSON_TYPES, DatasetReader, SeenIds, describe

FORMATS: tuple[str, ...] = ("jsonl", "ragas", "csv", "golden-yaml")
RAGAS_REQUIRED: tuple[str, ...] = ("user_input", "retrieved_contexts", "response")
REQUIRED = ", ".join(RAGAS_REQUIRED)
MAPPING_FIELDS: tuple[str, ...] = ("id", "question", "answer", "contexts", "referenceAnswer",
                                   "traceId", "metadata.<name>")  # fmt: skip
CHOICES = ", ".join(MAPPING_FIELDS)
DEFAULT_MAPPING = {"question": "question", "answer": "answer", "contexts": "contexts"}
EXAMPLE = "question=query,answer=response,contexts=ctx"
FIELD_LIMIT = 1 << 26  # csv's default 128 KiB per cell is too small for a row's contexts


class _CellError(Exception):
    """A bad value; the reader adds file and line."""


def _kind(value: object) -> str:
    return JSON_TYPES.get(type(value).__name__, type(value).__name__)


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


def _cell(record: dict[str, Any], column: str, csv_cell: bool, want: type, optional: bool) -> Any:
    """A column's value; absent, null or (CSV) empty gives None when optional."""
    value = record.get(column)
    if value is None or (csv_cell and value == ""):
        if optional:
            return None
        if csv_cell:
            return [] if want is list else ""
    elif want is list and csv_cell and isinstance(value, str):
        try:
            value = orjson.loads(value)
        except orjson.JSONDecodeError as exc:
            try:
                value = ast.literal_eval(value)  # pandas writes list cells as Python literals
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                raise _CellError(f"column {column!r}: not a JSON array: {exc}") from None
    if not isinstance(value, want):
        expected = "an array" if want is list else "a string"
        raise _CellError(f"column {column!r}: expected {expected}, got {_kind(value)}")
    return value


def _strings(column: str, items: list[Any]) -> list[str]:
    for i, item in enumerate(items):
        if not isinstance(item, str):
            raise _CellError(f"column {column!r}: item [{i}]: expected a string, got {_kind(item)}")
    return items


def parse_contexts(column: str, items: list[Any]) -> list[Context]:
    """Strings or ``{id, text, source, authority}`` objects → contexts; ids default to c<n>."""
    contexts: list[Context] = []
    for i, item in enumerate(items):
        where = f"column {column!r}: item [{i}]"
        item = {"text": item} if isinstance(item, str) else item
        if not isinstance(item, dict):
            raise _CellError(f"{where}: expected a string or an object, got {_kind(item)}")
        try:
            context = Context.model_validate({"id": f"c{i + 1}", **item})
        except ValidationError as exc:
            raise _CellError(f"{where}: {describe(exc, ignore_hint=False)}") from None
        if any(c.id == context.id for c in contexts):
            raise _CellError(f"{where}: duplicate context id {context.id!r}")
        contexts.append(context)
    return contexts


class _Reader(DatasetReader):
    """DatasetReader's bookkeeping over JSONL objects or CSV records, with line numbers."""

    from_csv = False

    def _check_columns(self, line: int, columns: list[str]) -> None:
        raise NotImplementedError

    def _row(self, line: int, record: dict[str, Any]) -> Row:
        raise NotImplementedError

    def _lines(self) -> Iterator[tuple[int, str]]:
        try:
            handle = self.path.open("rb")
        except OSError as exc:
            raise self._error(0, f"cannot read dataset: {exc.strerror or exc}") from None
        with handle:
            for number, raw in enumerate(handle, start=1):
                self._digest.update(raw)
                try:
                    yield number, (raw.removeprefix(BOM) if number == 1 else raw).decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise self._error(number, f"not valid UTF-8: {exc.reason}") from None

    def _jsonl_records(self) -> Iterator[tuple[int, dict[str, Any]]]:
        for number, text in self._lines():
            if not text.strip():
                continue
            try:
                data = orjson.loads(text)
            except orjson.JSONDecodeError as exc:
                raise self._error(number, f"invalid JSON: {exc}") from None
            if not isinstance(data, dict):
                raise self._error(number, f"expected a JSON object, got {_kind(data)}")
            self._check_columns(number, list(data))
            yield number, data

    def _csv_records(self) -> Iterator[tuple[int, dict[str, Any]]]:
        """Records by their first line (a quoted cell may span lines); blank lines skipped."""
        csv.field_size_limit(max(csv.field_size_limit(), FIELD_LIMIT))
        reader = csv.reader((text for _, text in self._lines()), strict=True)
        header: list[str] | None = None
        start = 1
        while True:
            try:
                record = next(reader, None)
            except csv.Error as exc:
                raise self._error(reader.line_num, f"invalid CSV: {exc}") from None
            if record is None:
                break
            if header is None and record:
                header = record
                duplicates = sorted({c for i, c in enumerate(header) if c in header[:i]})
                if duplicates:
                    raise self._error(start, f"duplicate column(s) {duplicates} in the header")
                self._check_columns(start, header)
            elif record and len(record) != len(header or ()):
                found = f"found {len(record)} columns, the header has {len(header or ())}"
                raise self._error(start, found)
            elif record and header:
                yield start, dict(zip(header, record, strict=True))
            start = reader.line_num + 1
        if header is None:
            raise self._error(0, "dataset is empty: no header row")

    def __iter__(self) -> Iterator[Row]:
        records = self._csv_records() if self.from_csv else self._jsonl_records()
        with closing(SeenIds()) as ids:
            for line, record in records:
                try:
                    row = self._row(line, record)
                except _CellError as exc:
                    raise self._error(line, str(exc)) from None
                except ValidationError as exc:
                    raise self._error(line, describe(exc, ignore_hint=False)) from None
                yield self._admit(row, line, ids)
        self._finish()


class RagasReader(_Reader):
    """Rows of a ragas-style JSONL or CSV file (chosen by the file extension)."""

    def __init__(self, path: str | Path) -> None:
        super().__init__(path)
        suffix = self.path.suffix.lower()
        if suffix not in (".jsonl", ".json", ".csv"):
            raise ConfigError(f"ragas datasets end in .jsonl, .json or .csv: {self.path.name!r}")
        self.from_csv = suffix == ".csv"

    def _check_columns(self, line: int, columns: list[str]) -> None:
        if missing := ", ".join(repr(c) for c in RAGAS_REQUIRED if c not in columns):
            raise self._error(line, f"missing ragas column(s) {missing}; required: {REQUIRED}")

    def _row(self, line: int, record: dict[str, Any]) -> Row:
        def cell(column: str, want: type, optional: bool = True) -> Any:
            return _cell(record, column, self.from_csv, want, optional)

        texts = _strings("retrieved_contexts", cell("retrieved_contexts", list, False))
        contexts = [Context(id=f"c{i}", text=text) for i, text in enumerate(texts, start=1)]
        references = _strings("reference_contexts", cell("reference_contexts", list) or [])
        golden = Golden(expected_documents=expected_documents(contexts, references))
        return Row(
            id=cell("id", str) or f"row-{line}",
            question=cell("user_input", str, False),
            contexts=contexts,
            answer=cell("response", str, False),
            reference_answer=cell("reference", str),
            golden=golden if references else None,
        )


class CsvReader(_Reader):
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
            contexts=parse_contexts(column, _cell(record, column, True, list, False)),
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
    if format == "csv":
        return CsvReader(path, parse_mapping(mapping) if isinstance(mapping, str) else mapping)
    if outputs is None:
        raise ConfigError("format 'golden-yaml' needs outputs: the JSONL of system outputs")
    return GoldenYamlReader(path, outputs, join, ignore_unknown_fields=ignore_unknown_fields)
