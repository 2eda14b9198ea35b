"""The base of the non-native readers: records with line numbers, streamed (file I/O).

A reader here turns *records* (JSON objects or CSV records, each with the line it starts
on) into :class:`Row`. Records come from, by the file's shape:

- JSON lines: one value per line (blank lines skipped), the ``.jsonl`` default;
- a JSON array (a ``.json`` file whose first non-blank character is ``[``): the array's
  items, split off one at a time by :func:`array_items` without holding the whole file, so
  an item's line is the line its first character is on;
- one JSON document (``.json`` starting with ``{`` that is not one value per line), for the
  formats that allow it (``documents``): parsed whole, its line is 1;
- CSV: records by their first line (a quoted cell may span lines), the header checked.

Every error names the file and the record's line (line 0: the file as a whole).
"""

from __future__ import annotations

import ast
import csv
import re
from collections.abc import Callable, Iterator
from contextlib import closing
from itertools import chain
from typing import Any

import orjson
from pydantic import ValidationError

from ragbatch.core.schema import Context, Row
from ragbatch.data.jsonl import BOM, JSON_TYPES, DatasetReader, SeenIds, describe

FIELD_LIMIT = 1 << 26  # csv's default 128 KiB per cell is too small for a row's contexts
# Outside strings: structure; inside: an escape pair (so \" does not end the string) or ".
_TOKEN = re.compile(r'\\.|["{}\[\],]')

Lines = Iterator[tuple[int, str]]
Records = Iterator[tuple[int, Any]]


class CellError(Exception):
    """A bad value; the reader adds file and line."""


def kind(value: object) -> str:
    """The JSON name of a value's type: string, number, array, object, ..."""
    return JSON_TYPES.get(type(value).__name__, type(value).__name__)


def array_items(lines: Lines, error: Callable[[int, str], Exception]) -> Lines:
    """The items of one top-level JSON array as ``(line, text)``, one at a time.

    ``lines`` are ``(number, text)`` with line ends kept; ``error(line, message)`` builds the
    exception for a file that is not one array. Items are not parsed here: ``orjson`` does
    that per item, so a bad item is reported at its own line.
    """
    depth, in_string, opened, closed, items = 0, False, False, False, 0
    parts: list[tuple[int, str]] = []
    number = 0

    def item() -> tuple[int, str] | None:
        text = "".join(part for _, part in parts)
        line = next((n for n, part in parts if part.strip()), number)
        parts.clear()
        return (line, text) if text.strip() else None

    for number, text in lines:
        start = 0
        for match in _TOKEN.finditer(text):
            token = match.group()
            if in_string:
                in_string = token != '"'
                continue
            if closed or not opened:
                if closed or token != "[" or text[: match.start()].strip():
                    raise error(number, "expected one JSON array of objects")
                opened, depth, start = True, 1, match.end()
            elif token == '"':
                in_string = True
            elif token in "{[":
                depth += 1
            elif token in "}]":
                depth -= 1
                if depth == 0:
                    parts.append((number, text[start : match.start()]))
                    last = item()
                    if last is not None:
                        yield last
                    elif items:
                        raise error(number, "invalid JSON: a comma before the closing ]")
                    closed, start = True, match.end()
            elif depth == 1:  # a comma between items
                parts.append((number, text[start : match.start()]))
                found = item()
                if found is None:
                    raise error(number, "invalid JSON: an empty array item")
                items += 1
                yield found
                start = match.end()
        rest = text[start:]
        if closed or not opened:
            if rest.strip():
                raise error(number, "expected one JSON array of objects")
        else:
            parts.append((number, rest))
    if not closed:
        raise error(number, "invalid JSON: the array is not closed")


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
            try:
                value = ast.literal_eval(value)  # pandas writes list cells as Python literals
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                raise CellError(f"column {column!r}: not a JSON array: {exc}") from None
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


class RecordReader(DatasetReader):
    """DatasetReader's bookkeeping over JSON or CSV records, with line numbers.

    Subclasses set ``from_csv`` (or leave JSON), check a record's columns and build its row.
    """

    from_csv = False
    documents = False  # a .json file may be one document (parsed whole)

    def _check_columns(self, line: int, columns: list[str]) -> None:
        raise NotImplementedError

    def _row(self, line: int, record: dict[str, Any]) -> Row:
        raise NotImplementedError

    def _lines(self) -> Lines:
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

    def _load(self, line: int, text: str) -> Any:
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError as exc:
            raise self._error(line, f"invalid JSON: {exc}") from None

    def _json_values(self) -> Records:
        """Every JSON value with its line: JSON lines, a JSON array's items, or a document."""
        lines = self._lines()
        for number, text in lines:  # noqa: B007 (used after the break)
            if text.strip():
                break
        else:
            return
        head = chain([(number, text)], lines)
        first = text.lstrip()
        if self.path.suffix.lower() == ".json" and first.startswith("["):
            for line, item in array_items(head, self._error):
                yield line, self._load(line, item)
            return
        if self.path.suffix.lower() == ".json" and first.startswith("{"):
            try:
                orjson.loads(text)
            except orjson.JSONDecodeError as exc:  # not one value per line: one document
                if not self.documents:
                    hint = "a .json dataset is JSON lines (one object a line) or one JSON array"
                    raise self._error(number, f"invalid JSON: {exc} ({hint})") from None
                yield number, self._load(number, "".join(part for _, part in head))
                return
        for line, part in head:
            if part.strip():
                yield line, self._load(line, part)

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
                yield start, dict(zip(header, record, strict=True))
            start = reader.line_num + 1
        if header is None:
            raise self._error(0, "dataset is empty: no header row")

    def _records(self) -> Records:
        return self._csv_records() if self.from_csv else self._json_records()

    def __iter__(self) -> Iterator[Row]:
        with closing(SeenIds()) as ids:
            for line, record in self._records():
                try:
                    row = self._row(line, record)
                except CellError as exc:
                    raise self._error(line, str(exc)) from None
                except ValidationError as exc:
                    raise self._error(line, describe(exc, ignore_hint=False)) from None
                yield self._admit(row, line, ids)
        self._finish()
