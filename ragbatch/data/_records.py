"""The base of the non-native readers: records with line numbers, streamed (file I/O).

A reader here turns *records* (JSON objects or CSV records, each with the line it starts
on) into :class:`Row`. Records come from, by the file's shape:

- JSON lines: one value per line (blank lines skipped), the ``.jsonl`` default;
- a JSON array (a ``.json`` file whose first non-blank character is ``[``): the array's
  items, split off one at a time by :func:`array_items` without holding the whole file, even
  when the array is one line (pandas ``to_json(orient="records")``); an item's line is the
  line its first character is on, its default id ``row-<position>`` (1-based);
- one JSON document (``.json`` starting with ``{`` that is not one value per line), for the
  formats that allow it (``documents``): parsed whole, its line is 1;
- CSV: records by their first line (a quoted cell may span lines), the header checked;
- Parquet (``.parquet``, for the formats that allow it): a batch of rows at a time, a
  row's "line" its 1-based number. Needs pyarrow (``pip install 'ragbatch[parquet]'``).

Every error names the file and the record's line (line 0: the file as a whole). A line, an
array item or a document longer than the line limit (:mod:`ragbatch.data._base`) is an error.
"""

from __future__ import annotations

import ast
import csv
import io
import itertools
import tokenize
from collections.abc import Callable, Iterator
from contextlib import closing
from itertools import chain
from typing import Any

import orjson
from pydantic import ValidationError

from ragbatch.core import ConfigError, Context, Row, install_extra
from ragbatch.data._arrays import array_items
from ragbatch.data._base import (
    JSON_TYPES,
    FileReader,
    ItemT,
    Pieces,
    SeenIds,
    describe,
    max_line_bytes,
    too_long,
    whole_lines,
)

FIELD_LIMIT = 1 << 26  # csv's default 128 KiB per cell is too small for a row's contexts

_PARQUET_BATCH = 1024

Lines = Iterator[tuple[int, str]]
Records = Iterator[tuple[int, Any]]


class CellError(Exception):
    """A bad value; the reader adds file and line."""


def kind(value: object) -> str:
    """The JSON name of a value's type: string, number, array, object, ..."""
    return JSON_TYPES.get(type(value).__name__, type(value).__name__)


_SKIP = {tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER}


def literal_list(column: str, text: str, exc: Exception) -> Any:
    """A list cell written by Python: pandas' list literal (``['a', 'b']``) or a numpy array's
    repr, which has no commas (``['a' 'b']``, Hugging Face ``Dataset.to_csv``). Evaluated item
    by item, so adjacent strings are never joined into one passage."""
    try:
        tokens = [t for t in tokenize.generate_tokens(io.StringIO(text).readline)
                  if t.type not in _SKIP]  # fmt: skip
    except (tokenize.TokenError, SyntaxError):
        tokens = []
    inner = tokens[1:-1]
    bracketed = len(tokens) >= 2 and tokens[0].string == "[" and tokens[-1].string == "]"
    if bracketed and any(t.string == "..." for t in inner):
        raise CellError(
            f"column {column!r}: a numpy array printed with '...' (items left out); write the "
            "file with to_json or to_parquet instead"
        )
    kinds = {t.type for t in inner}
    if bracketed and inner and kinds <= {tokenize.STRING, tokenize.NUMBER} and len(kinds) == 1:
        return [ast.literal_eval(t.string) for t in inner]  # a numpy repr: items by token
    adjacent = any(a.type == b.type == tokenize.STRING for a, b in itertools.pairwise(tokens))
    if adjacent:
        raise CellError(f"column {column!r}: strings without a comma between them, not an array")
    try:
        return ast.literal_eval(text)  # pandas writes list cells as Python literals
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        raise CellError(f"column {column!r}: not a JSON array: {exc}") from None


def cell(record: dict[str, Any], column: str, csv_cell: bool, want: type, optional: bool) -> Any:
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
            value = literal_list(column, value, exc)
    if not isinstance(value, want):
        expected = "an array" if want is list else "a string"
        raise CellError(f"column {column!r}: expected {expected}, got {kind(value)}")
    return value


def strings(column: str, items: list[Any]) -> list[str]:
    """``items`` checked to be strings."""
    for i, item in enumerate(items):
        if not isinstance(item, str):
            raise CellError(f"column {column!r}: item [{i}]: expected a string, got {kind(item)}")
    return items


def parse_contexts(column: str, items: list[Any]) -> list[Context]:
    """Strings or ``{id, text, source, authority}`` objects → contexts; ids default to c<n>."""
    contexts: list[Context] = []
    for i, item in enumerate(items):
        where = f"column {column!r}: item [{i}]"
        item = {"text": item} if isinstance(item, str) else item
        if not isinstance(item, dict):
            raise CellError(f"{where}: expected a string or an object, got {kind(item)}")
        try:
            context = Context.model_validate({"id": f"c{i + 1}", **item})
        except ValidationError as exc:
            raise CellError(f"{where}: {describe(exc, ignore_hint=False)}") from None
        if any(c.id == context.id for c in contexts):
            raise CellError(f"{where}: duplicate context id {context.id!r}")
        contexts.append(context)
    return contexts


class RecordReader(FileReader):
    """FileReader's bookkeeping over JSON, CSV or Parquet records, with line numbers.

    Subclasses set ``from_csv`` (or leave JSON), check a record's columns and build its row;
    ``self.fallback_id`` is the id of a record without one (``row-<line>``, or
    ``row-<position>`` for an array item or a Parquet row).
    """

    from_csv = False
    documents = False  # a .json file may be one document (parsed whole)
    fallback_id = ""

    def _check_columns(self, line: int, columns: list[str]) -> None:
        raise NotImplementedError

    def _row(self, line: int, record: dict[str, Any]) -> Row:
        raise NotImplementedError

    def _lines(self) -> Lines:
        return self._text_lines()

    def _load(self, line: int, text: str) -> Any:
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError as exc:
            raise self._error(line, f"invalid JSON: {exc}") from None

    def _json_values(self) -> Records:
        """Every JSON value with its line: JSON lines, a JSON array's items, or a document."""
        limit = max_line_bytes()
        with self._open() as handle:
            pieces = self._pieces(handle)
            for number, text, ends in pieces:  # noqa: B007 (used after the break)
                if text.strip():
                    break
            else:
                return
            head: Pieces = chain([(number, text, ends)], pieces)
            suffix = self.path.suffix.lower()
            if suffix == ".json" and text.lstrip().startswith("["):
                items = array_items(((n, t) for n, t, _ in head), self._error, limit)
                for position, (line, item) in enumerate(items, start=1):
                    self.fallback_id = f"row-{position}"
                    yield line, self._load(line, item)
                return
            lines = whole_lines(head, limit, self._error)
            if suffix == ".json" and text.lstrip().startswith("{"):
                number, first = next(lines)
                try:
                    orjson.loads(first)
                except orjson.JSONDecodeError as exc:  # not one value per line: one document
                    if not self.documents:
                        hint = "a .json dataset is JSON lines (one object a line) or one JSON array"
                        raise self._error(number, f"invalid JSON: {exc} ({hint})") from None
                    yield number, self._load(number, self._document(first, lines, limit))
                    return
                lines = chain([(number, first)], lines)
            for line, part in lines:
                if part.strip():
                    self.fallback_id = f"row-{line}"
                    yield line, self._load(line, part)

    def _document(self, first: str, lines: Lines, limit: int) -> str:
        parts, size = [first], len(first)
        for number, text in lines:
            parts.append(text)
            size += len(text)
            if size > limit:
                raise self._error(number, too_long(limit, "JSON document"))
        return "".join(parts)

    def _json_records(self) -> Records:
        for line, data in self._json_values():
            if not isinstance(data, dict):
                raise self._error(line, f"expected a JSON object, got {kind(data)}")
            self._check_columns(line, list(data))
            yield line, data

    def _csv_records(self) -> Records:
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
                self.fallback_id = f"row-{start}"
                yield start, dict(zip(header, record, strict=True))
            start = reader.line_num + 1
        if header is None:
            raise self._error(0, "dataset is empty: no header row")

    def _parquet(self) -> Records:
        """Parquet rows as records (nulls dropped), a batch at a time; "line": the row number."""
        try:
            import pyarrow.parquet as pq
        except ImportError:
            raise ConfigError(
                f"reading Parquet needs pyarrow: {install_extra('parquet')}"
            ) from None
        with self._open() as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                self._digest.update(chunk)
        line = 0
        try:  # pyarrow's errors: ArrowInvalid is a ValueError, ArrowIOError an OSError
            for batch in pq.ParquetFile(self.path).iter_batches(batch_size=_PARQUET_BATCH):
                for record in batch.to_pylist():
                    line += 1
                    self.fallback_id = f"row-{line}"
                    yield line, record
        except (OSError, ValueError) as exc:
            raise self._error(line, f"not a readable Parquet file: {exc}") from None

    def _parquet_records(self) -> Records:
        for line, data in self._parquet():
            data = drop_nulls(data)
            self._check_columns(line, list(data))
            yield line, data

    def _records(self) -> Records:
        if self.path.suffix.lower() == ".parquet":
            return self._parquet_records()
        return self._csv_records() if self.from_csv else self._json_records()

    def __iter__(self) -> Iterator[Row]:
        return self._each(self._row)

    def _each(self, build: Callable[[int, dict[str, Any]], ItemT]) -> Iterator[ItemT]:
        """``build(line, record)`` of every record, admitted (unique ids, counted)."""
        with closing(SeenIds()) as ids:
            for line, record in self._records():
                try:
                    item = build(line, record)
                except CellError as exc:
                    raise self._error(line, str(exc)) from None
                except ValidationError as exc:
                    raise self._error(line, describe(exc, ignore_hint=False)) from None
                yield self._admit(item, line, ids)
        self._finish()


def drop_nulls(value: Any) -> Any:
    """``value`` with every null object member left out, at any depth: Arrow (Parquet, a
    Hugging Face Dataset, a DataFrame of nested rows) gives every row every key of every
    other row, null where it had none; those nulls mean absent."""
    if isinstance(value, dict):
        return {k: drop_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [drop_nulls(v) for v in value]
    return value
