"""``--rows-out``: per-row results streamed to JSONL in input order as rows complete.

Each line is the row's ``rows[]`` entry of the report with the row's ``question`` after its
``id`` (the report itself carries no dataset text), so the file can be read on its own.

The runner hands rows on in input order (a row finished early waits in its bounded reordering
window), so the file is written straight through: nothing per row is kept in memory.
"""

from __future__ import annotations

import os
from pathlib import Path

import orjson

from ragbatch.report.models import RowResult


class RowsWriter:
    """Appends each row's result as the runner hands it on (input order) and flushes, so a
    crash leaves every row before it on disk; the file appears under its name at the end."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._part = path.with_name(f".{path.name}.part")
        self._handle = self._part.open("wb")

    def write(self, result: RowResult, question: str) -> None:
        """One row's result as in the report's ``rows[]``, with its question after the id."""
        data = result.model_dump(mode="json", by_alias=True, exclude_none=True)
        line = {"id": data.pop("id"), "question": question, **data}
        self._handle.write(orjson.dumps(line) + b"\n")
        self._handle.flush()

    def close(self) -> None:
        self._handle.close()
        os.replace(self._part, self.path)
