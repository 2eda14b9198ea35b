"""``--rows-out``: per-row results streamed to JSONL in input order as rows complete.

Each line is the row's ``rows[]`` entry of the report with the row's ``question`` after its
``id`` (the report itself carries no dataset text), so the file can be read on its own.

The runner hands rows on in input order (a row finished early waits in its bounded reordering
window), so the file is written straight through: nothing per row is kept in memory. With
``--workers`` each worker streams its shard to its own file and :func:`merge_rows` interleaves
them back into input order, so the result is the bytes a single process writes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from contextlib import ExitStack
from pathlib import Path

import orjson

from ragbatch._files import AtomicFile, atomic_file, temporaries_of
from ragbatch.report._models import RowResult, row_json


class RowsWriter:
    """Appends each row's result as the runner hands it on (input order) and flushes, so a
    crash leaves every row before it on disk (in a ``.<name>.<random>.part`` file beside it:
    :meth:`leftovers_of`); the file appears under its name at the end.

    ``flush=False`` leaves the lines in the file's buffer until it fills: for a shard's file
    that its parent reads back whole and nobody reads after a crash (a ``--workers`` worker's, a
    Dask task's). A flush a row is a system call a row, and in a Dask task each releases the GIL
    to the worker's event loop, which then wakes to lose it again (docs/benchmarks.md)."""

    SUFFIX = "part"

    def __init__(self, path: Path, *, flush: bool = True) -> None:
        self.path = path
        self._file = AtomicFile(path, self.SUFFIX)
        self._flush = flush

    @classmethod
    def leftovers_of(cls, path: Path) -> list[Path]:
        """The unfinished rows files of ``path`` a killed writer left beside it."""
        return temporaries_of(path, cls.SUFFIX)

    def write(self, result: RowResult, question: str) -> None:
        """One row's result as in the report's ``rows[]``, with its question after the id."""
        data = row_json(result.model_dump(mode="json", by_alias=True, exclude_none=True))
        line = {"id": data.pop("id"), "question": question, **data}
        self.write_line(orjson.dumps(line))

    def write_line(self, line: bytes) -> None:
        """One already serialised row result (without its newline)."""
        self._file.write(line + b"\n", flush=self._flush)

    def close(self) -> None:
        """Put the file under its name."""
        self._file.commit()

    def discard(self) -> None:
        """Drop what was written: the file under its name is left as it was."""
        self._file.discard()


def merge_rows(path: Path, parts: Sequence[Path], owners: Iterable[int]) -> int:
    """Write the shards' rows files ``parts`` to ``path`` in input order; ``owners`` names, row
    by row in input order, the index in ``parts`` of the file holding that row. Returns the
    number of rows written."""
    rows = 0
    with atomic_file(path, RowsWriter.SUFFIX) as out, ExitStack() as stack:
        handles = [stack.enter_context(part.open("rb")) for part in parts]
        for owner in owners:
            line = handles[owner].readline()
            if not line.endswith(b"\n"):
                raise RuntimeError(f"{parts[owner]} ends before row {rows + 1}")
            out.write(line)
            rows += 1
        for part, handle in zip(parts, handles, strict=True):
            if handle.readline():
                raise RuntimeError(f"{part} holds more rows than its shard evaluated")
    return rows
