"""Split a JSONL dataset between processes without each one reading all of it (file I/O).

The parent reads the file once (:func:`plan_rows`): the sha256 of its bytes and where each
row's line starts, with no JSON parsing. Part k of n is a consecutive range of rows
(:func:`part_bounds`), so each part's report builder merges in order into the whole's
(:mod:`ragbatch.report._merge`); the split depends only on the file and n, so a rerun with the
same options gives each part the same rows. A part is a :class:`PlannedRows` source: it
parses and validates only its own rows (from the file, or from the raw bytes it was sent when
the worker cannot see the client's disk), with the file's name and line number in every
error, as the single-process reader reports them. A duplicate id across two parts is found
when the parts are merged (:func:`check_duplicate_ids`), at the later row's line.
"""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Iterable, Iterator, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from ragbatch.core import DatasetError, Row, Trace
from ragbatch.data import BOM, SeenIds, describe, foreign_shape, parse_item, scan_lines


def part_bounds(rows: int, parts: int, k: int) -> tuple[int, int]:
    """Input indices [start, end) of part ``k`` (1-based) of ``parts``: consecutive ranges of
    nearly equal size, so each part's summary merges in order into the whole's."""
    return rows * (k - 1) // parts, rows * k // parts


@dataclass(frozen=True)
class RowPlan:
    """Where the rows of one JSONL file are: ``starts[i]`` and ``ends[i]`` are the byte span
    of row i's line, ``lines[i]`` its 1-based line number."""

    path: Path
    sha256: str
    starts: array[int]
    ends: array[int]
    lines: array[int]

    @property
    def rows(self) -> int:
        return len(self.starts)


def plan_rows(path: Path) -> RowPlan | None:
    """One pass over the file's bytes (no parsing); None when it cannot be read or has a line
    over the reader's limit (the run itself then reports it, with the reader's message)."""
    digest = hashlib.sha256()
    starts, ends, lines = array("q"), array("q"), array("q")
    offset = 0
    try:
        with path.open("rb") as handle:
            for number, raw in enumerate(scan_lines(handle), start=1):
                digest.update(raw)
                skip = len(BOM) if number == 1 and raw.startswith(BOM) else 0
                if raw.strip() and raw[skip:].strip():
                    starts.append(offset + skip)
                    ends.append(offset + len(raw))
                    lines.append(number)
                offset += len(raw)
            if handle.read(1):  # the scan stopped before a line over the limit
                return None
    except OSError:
        return None
    return RowPlan(path, digest.hexdigest(), starts, ends, lines)


@dataclass
class PlannedRows:
    """The rows of one part, as a row source for a job (``config.source``): ``indices`` are
    their input indices, ``lines`` their line numbers; the bytes come from ``path`` at
    ``starts``/``ends``, or from ``blob`` (the part's lines, sent to a worker that cannot read
    the client's disk) at the same offsets relative to the blob. ``keep_texts`` (an HTML view
    to write) asks the part's run to keep each row's question and answer for the parent's view,
    as judged: a trace's are its deciding turn's, known once it is judged."""

    path: Path  # the dataset as the user named it (error messages), read unless blob is set
    sha256: str
    rows: int  # rows in the whole dataset
    indices: array[int]
    lines: array[int]
    starts: array[int]
    ends: array[int]
    ignore_unknown_fields: bool = False
    blob: bytes | None = field(default=None, repr=False)
    keep_texts: bool = False
    name: str = field(init=False)
    ids: list[str] = field(init=False, default_factory=list)  # of the rows read, in order

    def __post_init__(self) -> None:
        self.name = self.path.name

    @property
    def part_rows(self) -> int:
        """Rows this part evaluates (the progress total)."""
        return len(self.indices)

    def pairs(self) -> Iterator[tuple[int, Row | Trace]]:
        """(input index, row) of this part's rows, in input order; a bad line raises the
        reader's own :class:`DatasetError` at its line."""
        ids = SeenIds()
        spans = zip(self.indices, self.lines, self.starts, self.ends, strict=True)
        if self.blob is not None:
            yield from self._parsed(ids, ((i, n, self.blob[a:b]) for i, n, a, b in spans))
            return
        try:
            handle = self.path.open("rb")
        except OSError as exc:
            raise DatasetError(str(self.path), 0, f"cannot read dataset: {exc.strerror}") from None
        with handle:

            def read(start: int, end: int) -> bytes:
                handle.seek(start)
                return handle.read(end - start)

            yield from self._parsed(ids, ((i, n, read(a, b)) for i, n, a, b in spans))

    def _parsed(
        self, ids: SeenIds, raws: Iterable[tuple[int, int, bytes]]
    ) -> Iterator[tuple[int, Row | Trace]]:
        # the reader's own checks and messages: UTF-8, the row schema, a duplicate in the part
        where = str(self.path)
        with closing(ids):
            for index, line, raw in raws:
                try:
                    raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise DatasetError(where, line, f"not valid UTF-8: {exc.reason}") from None
                try:
                    row = parse_item(raw, ignore_unknown_fields=self.ignore_unknown_fields)
                except ValidationError as exc:
                    message = describe(exc)
                    if index == 0 and (hint := foreign_shape(raw)):  # as the reader says it
                        message = f"{message}: {hint}"
                    raise DatasetError(where, line, message) from None
                if not ids.add(row.id):
                    raise DatasetError(where, line, f"duplicate row id {row.id!r}")
                self.ids.append(row.id)
                yield index, row

    def __iter__(self) -> Iterator[Row | Trace]:
        return (row for _, row in self.pairs())


def part_source(
    plan: RowPlan, k: int, parts: int, *, ignore_unknown: bool, keep_texts: bool = False
) -> PlannedRows:
    """Part ``k`` of ``parts``: its rows read from the planned file."""
    start, end = part_bounds(plan.rows, parts, k)
    return PlannedRows(
        plan.path,
        plan.sha256,
        plan.rows,
        array("q", range(start, end)),
        plan.lines[start:end],
        plan.starts[start:end],
        plan.ends[start:end],
        ignore_unknown,
        keep_texts=keep_texts,
    )


def detached(source: PlannedRows) -> PlannedRows:
    """The same part carrying its own bytes, for a worker that cannot read the file."""
    blob, starts, ends = bytearray(), array("q"), array("q")
    with source.path.open("rb") as handle:
        for start, end in zip(source.starts, source.ends, strict=True):
            handle.seek(start)
            starts.append(len(blob))
            blob += handle.read(end - start)
            ends.append(len(blob))
    return PlannedRows(
        source.path,
        source.sha256,
        source.rows,
        source.indices,
        source.lines,
        starts,
        ends,
        source.ignore_unknown_fields,
        bytes(blob),
        source.keep_texts,
    )


def check_duplicate_ids(parts: Sequence[list[str]], plan: RowPlan) -> None:
    """Raise the reader's error for the first row whose id an earlier row already has;
    ``parts`` are the ids of consecutive parts, in input order."""
    ids = SeenIds()
    index = 0
    try:
        for part in parts:
            for row_id in part:
                if not ids.add(row_id):
                    line = plan.lines[index]
                    raise DatasetError(str(plan.path), line, f"duplicate row id {row_id!r}")
                index += 1
    finally:
        ids.close()
