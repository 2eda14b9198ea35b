"""Streaming reader of ragbatch's own JSONL datasets, with file and line in every error.

Rows are parsed one line at a time, so the first call can start before the file has been
read. The sha256 of the file's bytes is computed on the way and is available once the reader
is exhausted. Blank lines and a UTF-8 byte-order mark are accepted; a line longer than the
line limit (see :mod:`ragbatch.data._base`) is an error.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import orjson
from pydantic import ValidationError

from ragbatch.core import Row
from ragbatch.data._base import (
    BOM,
    JSON_TYPES,
    FileReader,
    ItemT,
    SeenIds,
    bounded_lines,
    describe,
    max_line_bytes,
)
from ragbatch.data._hints import foreign_shape

__all__ = ["BOM", "JSON_TYPES", "JsonlReader", "SeenIds", "describe"]


class JsonlReader(FileReader):
    """Iterate over the rows of one ragbatch JSONL file; DatasetError on the first bad line."""

    def __init__(self, path: str | Path, *, ignore_unknown_fields: bool = False) -> None:
        super().__init__(path)
        self.ignore_unknown_fields = ignore_unknown_fields

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
        return self._parsed(self._parse)

    def _parsed(self, parse: Callable[[bytes], ItemT]) -> Iterator[ItemT]:
        """``parse(line)`` of every non-blank line, admitted (unique ids, counted)."""
        limit = max_line_bytes()
        with self._open() as handle, closing(SeenIds()) as ids:
            for number, raw in bounded_lines(handle, limit, self._error):
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
                    item = parse(raw)
                except ValidationError as exc:
                    message = describe(exc)
                    if self.rows == 0 and (hint := foreign_shape(raw)):
                        message = f"{message}: {hint}"
                    raise self._error(number, message) from None
                yield self._admit(item, number, ids)
        self._finish()
