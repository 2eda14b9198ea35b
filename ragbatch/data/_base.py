"""What every dataset reader shares: the row-source protocol, the file reader base, bounded
line reading, the duplicate-id check and pydantic errors in the dataset's own words.

A *row source* (:class:`RowSource`) is anything the run reads rows from: a file reader here,
a golden-set join, rows given in memory. :class:`FileReader` is the base of the file
readers: it counts rows, hashes the bytes it read and names file and line in every error.

Lines are read at most :func:`max_line_bytes` at a time (64 MiB by default, the environment
variable ``RAGBATCH_MAX_LINE_BYTES`` changes it), so a file with an endless line stops with
``line longer than …`` instead of growing the process until the machine runs out of memory.
"""

from __future__ import annotations

import codecs
import hashlib
import os
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO, Protocol, TypeVar

from pydantic import ValidationError

from ragbatch.core import STEP_KINDS, ConfigError, DatasetError, Row, Trace
from ragbatch.data._hints import missing_default

BOM = b"\xef\xbb\xbf"
JSON_TYPES = {"list": "array", "str": "string", "int": "number", "float": "number",
              "bool": "boolean", "NoneType": "null", "dict": "object"}  # fmt: skip
MAX_LINE_BYTES = 64 << 20  # a dataset line (or array item, or JSON document) at most
MAX_LINE_VARIABLE = "RAGBATCH_MAX_LINE_BYTES"
_PIECE = 1 << 20  # a long line is read in pieces of this many bytes


class RowSource(Protocol):
    """Rows to evaluate; ``name``, ``rows`` and ``sha256`` are known once iterated."""

    rows: int

    @property
    def name(self) -> str: ...

    @property
    def sha256(self) -> str: ...

    def __iter__(self) -> Iterator[Row]: ...


class ItemSource(Protocol):
    """Rows and multi-step traces to evaluate, in input order (docs/semantics.md §8); a
    reader of traces is one (``items()``), and its ``rows`` counts both."""

    @property
    def rows(self) -> int: ...

    @property
    def name(self) -> str: ...

    @property
    def sha256(self) -> str: ...

    def items(self) -> Iterator[Row | Trace]: ...


class Identified(Protocol):
    @property
    def id(self) -> str: ...


ItemT = TypeVar("ItemT", bound=Identified)


def max_line_bytes() -> int:
    """The longest dataset line read: ``RAGBATCH_MAX_LINE_BYTES``, else 64 MiB."""
    text = os.environ.get(MAX_LINE_VARIABLE, "").strip()
    if not text:
        return MAX_LINE_BYTES
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise ConfigError(f"{MAX_LINE_VARIABLE} must be a positive number of bytes, got {text!r}")
    return value


def too_long(limit: int, what: str = "line") -> str:
    """The message for a line (or item, or document) over ``limit``."""
    return f"{what} longer than {limit:,} bytes (raise the limit with {MAX_LINE_VARIABLE})"


Pieces = Iterator[tuple[int, str, bool]]


def read_pieces(
    handle: BinaryIO, error: Callable[[int, str], Exception], update: Callable[[bytes], None]
) -> Pieces:
    """``(line, text, ends_line)``: the file decoded as UTF-8 in pieces of at most 1 MiB, so a
    long line never sits whole in memory here. A piece never ends on a backslash inside a
    line (the escaped character is read with it), so JSON tokenising across pieces is exact.
    A first-line byte-order mark is dropped."""
    number = 1
    decoder = codecs.getincrementaldecoder("utf-8")("strict")
    while raw := handle.readline(_PIECE):
        if raw.endswith(b"\\"):
            raw += handle.read(1)
        update(raw)
        if number == 1 and raw.startswith(BOM):
            raw = raw[len(BOM) :]
        ends = raw.endswith(b"\n")
        try:
            text = decoder.decode(raw, final=ends)
        except UnicodeDecodeError as exc:
            raise error(number, f"not valid UTF-8: {exc.reason}") from None
        yield number, text, ends
        if ends:
            number += 1
            decoder.reset()
    try:
        decoder.decode(b"", final=True)
    except UnicodeDecodeError as exc:
        raise error(number, f"not valid UTF-8: {exc.reason}") from None


def whole_lines(
    pieces: Pieces, limit: int, error: Callable[[int, str], Exception]
) -> Iterator[tuple[int, str]]:
    """Lines (ends kept) joined from ``pieces``; a line over ``limit`` bytes is an error."""
    parts: list[str] = []
    size = 0
    number = 0
    for number, text, ends in pieces:
        parts.append(text)
        size += len(text.encode())
        if size - ends > limit:
            raise error(number, too_long(limit))
        if ends:
            yield number, "".join(parts)
            parts, size = [], 0
    if parts:
        yield number, "".join(parts)


def bounded_lines(
    handle: BinaryIO, limit: int, error: Callable[[int, str], Exception]
) -> Iterator[tuple[int, bytes]]:
    """``(line, bytes)`` of each line, read at most ``limit`` bytes (plus its end) at a time."""
    number = 0
    while raw := handle.readline(limit + 1):
        number += 1
        if len(raw) > limit and not raw.endswith(b"\n"):
            raise error(number, too_long(limit))
        yield number, raw


def scan_lines(handle: BinaryIO) -> Iterator[bytes]:
    """The lines of a quick pre-scan (row counts, metadata), each at most the line limit; it
    stops quietly before a longer line, which the reader then reports with file and line."""
    limit = max_line_bytes()
    while raw := handle.readline(limit + 1):
        if len(raw) > limit and not raw.endswith(b"\n"):
            return
        yield raw


PLAIN = {
    "string_type": "expected a string",
    "bool_type": "expected true or false",
    "int_type": "expected an integer",
    "float_type": "expected a number",
    "finite_number": "expected a finite number, got NaN or infinity",
    "list_type": "expected an array",
    "dict_type": "expected an object",
    "model_type": "expected an object",
    "string_too_short": "must not be empty",
}


def field_path(loc: tuple[int | str, ...]) -> str:
    """('contexts', 1, 'id') -> 'contexts[1].id'."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def untagged(loc: tuple[int | str, ...]) -> tuple[int | str, ...]:
    """A location without the tag pydantic adds inside a trace's steps (``steps[1].retrieval
    .query`` is ``steps[1].query`` in the file)."""
    if len(loc) > 2 and loc[0] == "steps" and isinstance(loc[1], int) and loc[2] in STEP_KINDS:
        return loc[:2] + loc[3:]
    return loc


def describe(exc: ValidationError, ignore_hint: bool = True) -> str:
    """One line for the first problem pydantic found, in the dataset's own field names."""
    err = exc.errors()[0]
    kind, loc, msg = err["type"], untagged(tuple(err["loc"])), err["msg"]
    where = field_path(loc)
    if kind == "union_tag_invalid":
        return (
            f"field '{where}.kind': unknown step kind {err['ctx']['tag']!r} "
            f"(one of {', '.join(STEP_KINDS)})"
        )
    if kind == "union_tag_not_found":
        return f"missing field '{where}.kind'"
    if kind == "json_invalid":
        return f"invalid JSON: {err.get('ctx', {}).get('error', msg)}"
    if kind == "model_type" and not loc:
        found = JSON_TYPES.get(type(err["input"]).__name__, type(err["input"]).__name__)
        return f"expected a JSON object, got {found}"
    if kind == "missing":
        return f"missing field '{where}'"
    if kind == "extra_forbidden":
        hint = " (pass --ignore-unknown-fields to skip unknown top-level fields)"
        return f"unknown field '{where}'" + (hint if ignore_hint and len(loc) == 1 else "")
    if kind == "value_error":
        return msg.removeprefix("Value error, ")
    if kind == "literal_error" and loc and loc[-1] == "diagnosis":
        return f"field '{where}': unknown diagnosis label {err['input']!r}"
    if kind == "less_than_equal":
        return f"field '{where}': must be <= {err['ctx']['le']}, got {err['input']!r}"
    if kind == "greater_than_equal":
        return f"field '{where}': must be >= {err['ctx']['ge']}, got {err['input']!r}"
    return f"field '{where}': {PLAIN.get(kind, msg)}"


SPILL_IDS = 100_000  # ids kept in a set before they move to a temporary SQLite table


class SeenIds:
    """The row ids read so far, so a duplicate is rejected at its own line.

    Up to ``spill`` ids live in a set; past that they move to a private temporary SQLite
    database (``sqlite3.connect("")``: on disk, deleted when closed, a few MB of page cache),
    so a multi-million-row file does not hold every id in memory (a set costs about 94 bytes
    an id). Exact either way: a lookup is a primary-key probe, never a hash guess.
    """

    def __init__(self, spill: int | None = None) -> None:
        self.spill = SPILL_IDS if spill is None else spill
        self._set: set[str] = set()
        self._db: sqlite3.Connection | None = None

    def add(self, row_id: str) -> bool:
        """Record ``row_id``; False if it was already there."""
        if self._db is None:
            if row_id in self._set:
                return False
            self._set.add(row_id)
            if len(self._set) > self.spill:
                self._move_to_disk()
            return True
        try:
            self._db.execute("INSERT INTO ids VALUES (?)", (row_id,))
        except sqlite3.IntegrityError:
            return False
        return True

    def _move_to_disk(self) -> None:
        db = sqlite3.connect("", isolation_level=None)
        db.execute("PRAGMA journal_mode=OFF")
        db.execute("PRAGMA synchronous=OFF")
        db.execute("PRAGMA cache_size=-16384")  # 16 MiB
        db.execute("CREATE TABLE ids (id TEXT PRIMARY KEY) WITHOUT ROWID")
        db.execute("BEGIN")  # one transaction for the whole file: nothing here must survive
        db.executemany("INSERT INTO ids VALUES (?)", ((i,) for i in self._set))
        self._set = set()
        self._db = db

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
        self._set = set()


class FileReader:
    """The base of every file reader: path, row count, sha256 of the bytes read, errors that
    name file and line, and the checks every reader makes (unique ids, at least one row)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.rows = 0
        self._digest = hashlib.sha256()
        self._done = False

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def sha256(self) -> str:
        if not self._done:
            raise RuntimeError("sha256 is known only once every row has been read")
        return self._digest.hexdigest()

    def _error(self, line: int, message: str) -> DatasetError:
        return DatasetError(str(self.path), line, message)

    def _open(self) -> BinaryIO:
        try:
            return self.path.open("rb")
        except OSError as exc:
            hint = missing_default(self.path) if isinstance(exc, FileNotFoundError) else ""
            raise self._error(0, f"cannot read dataset: {exc.strerror or exc}{hint}") from None

    def _pieces(self, handle: BinaryIO) -> Pieces:
        return read_pieces(handle, self._error, self._digest.update)

    def _text_lines(self) -> Iterator[tuple[int, str]]:
        """The file's lines, decoded, each at most :func:`max_line_bytes`."""
        limit = max_line_bytes()
        with self._open() as handle:
            yield from whole_lines(self._pieces(handle), limit, self._error)

    def _admit(self, row: ItemT, line: int, ids: SeenIds) -> ItemT:
        """Count a parsed row (or trace); its id must be new in the file."""
        if not ids.add(row.id):
            raise self._error(line, f"duplicate row id {row.id!r}")
        self.rows += 1
        return row

    def _finish(self) -> None:
        if self.rows == 0:
            raise self._error(0, "dataset is empty: no rows")
        self._done = True
