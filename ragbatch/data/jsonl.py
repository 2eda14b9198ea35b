"""Streaming JSONL reader with file and line numbers in every error (does file I/O).

Rows are parsed one line at a time, so the first call can start before the file has been
read. The sha256 of the file's bytes is computed on the way and is available once the reader
is exhausted. Blank lines and a UTF-8 byte-order mark are accepted.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import orjson
from pydantic import ValidationError

from ragbatch.core.errors import DatasetError
from ragbatch.core.schema import Row

BOM = b"\xef\xbb\xbf"
JSON_TYPES = {"list": "array", "str": "string", "int": "number", "float": "number",
              "bool": "boolean", "NoneType": "null", "dict": "object"}  # fmt: skip


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


def describe(exc: ValidationError, ignore_hint: bool = True) -> str:
    """One line for the first problem pydantic found, in the dataset's own field names."""
    err = exc.errors()[0]
    kind, loc, msg = err["type"], tuple(err["loc"]), err["msg"]
    where = field_path(loc)
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


class DatasetReader:
    """Iterate over the rows of one JSONL file; raise DatasetError on the first bad line."""

    def __init__(self, path: str | Path, *, ignore_unknown_fields: bool = False) -> None:
        self.path = Path(path)
        self.ignore_unknown_fields = ignore_unknown_fields
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

    def _parse(self, raw: bytes) -> Row:
        if not self.ignore_unknown_fields:
            return Row.model_validate_json(raw)
        try:
            data: Any = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return Row.model_validate_json(raw)  # same message as the strict path
        if isinstance(data, dict):
            known = {f.alias or name for name, f in Row.model_fields.items()}
            data = {k: v for k, v in data.items() if k in known}
        return Row.model_validate_json(orjson.dumps(data))

    def __iter__(self) -> Iterator[Row]:
        try:
            handle = self.path.open("rb")
        except OSError as exc:
            raise self._error(0, f"cannot read dataset: {exc.strerror or exc}") from None
        ids = SeenIds()
        with handle, closing(ids):
            for number, raw in enumerate(handle, start=1):
                self._digest.update(raw)
                if number == 1 and raw.startswith(BOM):
                    raw = raw[len(BOM) :]
                if not raw.strip():
                    continue
                try:
                    raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise self._error(number, f"not valid UTF-8: {exc.reason}") from None
                try:
                    row = self._parse(raw)
                except ValidationError as exc:
                    raise self._error(number, describe(exc)) from None
                yield self._admit(row, number, ids)
        self._finish()

    def _admit(self, row: Row, line: int, ids: SeenIds) -> Row:
        """Count a parsed row; its id must be new in the file."""
        if not ids.add(row.id):
            raise self._error(line, f"duplicate row id {row.id!r}")
        self.rows += 1
        return row

    def _finish(self) -> None:
        if self.rows == 0:
            raise self._error(0, "dataset is empty: no rows")
        self._done = True
