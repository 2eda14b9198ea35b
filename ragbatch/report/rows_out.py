"""``--rows-out``: per-row results streamed to JSONL in input order as rows complete.

The runner hands rows on in input order (a row finished early waits in its bounded reordering
window), so the file is written straight through: nothing per row is kept in memory.
"""

from __future__ import annotations

import os
from pathlib import Path

from ragbatch.report.models import RowResult


class RowsWriter:
    """Appends each row's result as the runner hands it on (input order) and flushes, so a
    crash leaves every row before it on disk; the file appears under its name at the end."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._part = path.with_name(f".{path.name}.part")
        self._handle = self._part.open("wb")

    def write(self, result: RowResult) -> None:
        """One row's result, exactly as it appears in the report's ``rows[]``."""
        self._handle.write(result.model_dump_json(by_alias=True, exclude_none=True).encode())
        self._handle.write(b"\n")
        self._handle.flush()

    def close(self) -> None:
        self._handle.close()
        os.replace(self._part, self.path)
