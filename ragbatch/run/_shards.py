"""Shards and partial results: split a dataset, write one shard's outcomes, merge (file I/O).

A row belongs to shard ``K`` of ``N`` when ``sha256(row id) mod N == K - 1``: the partition
depends only on the row's id, so it is stable under re-runs and independent of the order of
other rows. Every shard reads the whole file (to know each row's input index and the file's
sha256) and evaluates its own rows. :class:`Shard` is the one place that decides which rows a
part of a run evaluates, counts, keeps and writes (a ``--shard K/N``, a worker's, a Dask task's).

A partial file is JSONL: one header line (what the run was: dataset, shard, and the full
:class:`~ragbatch.report._builder.RunInfo` with policy, pricing snapshot and models), then one line
per evaluated row (the complete :class:`~ragbatch.core._outcome.RowOutcome`, recorded latencies and
usage included). Merging sorts outcomes by input index and summarizes them with the same code
as a single run, so the merged report is byte-identical to a single-process report.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

from ragbatch._files import atomic_file
from ragbatch.core import ConfigError, DatasetError, Row, RowOutcome, Trace
from ragbatch.data import scan_lines
from ragbatch.report import ReportBuilder, RunInfo
from ragbatch.run._calls import CallLog
from ragbatch.run._summary import PartSummary, write_summary

PARTIAL_VERSION = 1


# The partial file's row and header types, built on first use: a run that writes no partial
# does not pay for their schemas at start-up.
@cache
def _outcomes() -> TypeAdapter[RowOutcome]:
    return TypeAdapter(RowOutcome)


@cache
def _info() -> TypeAdapter[RunInfo]:
    return TypeAdapter(RunInfo)


def parse_shard(text: str) -> tuple[int, int]:
    """'K/N' -> (K, N) with 1 <= K <= N."""
    try:
        k_text, n_text = text.split("/")
        k, n = int(k_text), int(n_text)
    except ValueError:
        raise ConfigError(f"--shard must look like K/N (e.g. 2/8), got {text!r}") from None
    if not 1 <= k <= n:
        raise ConfigError(f"--shard {text}: need 1 <= K <= N")
    return k, n


def shard_of(row_id: str, shards: int) -> int:
    """The 1-based shard of a row id among ``shards``."""
    digest = hashlib.sha256(row_id.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % shards + 1


@dataclass(frozen=True)
class Shard:
    """The part of a run one process evaluates: shard ``k`` of ``n`` (``--shard K/N``, a
    worker's, a Dask task's), read by ``reader`` (a planned part of a JSONL file reads only its
    own rows, see :mod:`ragbatch.run._split`; any other reader, the whole file) and written to
    ``partial``. Which rows it evaluates, counts, keeps and writes is decided here alone."""

    k: int
    n: int
    partial: Path
    reader: Any

    @property
    def label(self) -> str:
        """What the progress lines call it."""
        return f"shard {self.k}/{self.n}"

    @property
    def planned(self) -> int | None:
        """The rows of a planned part, None for a shard by hash of id."""
        return part_rows(self.reader)

    @property
    def keeps_outcomes(self) -> bool:
        """Whether it keeps its outcomes: a partial file holds them; a planned part sends its
        summary and keeps none."""
        return self.planned is None

    @property
    def keeps_texts(self) -> bool:
        """Whether its run keeps each row's question and answer: a planned part's, for the
        parent's HTML view (a partial file holds the outcomes, and so the rows, already)."""
        return self.planned is not None and bool(self.reader.keep_texts)

    def pairs(self) -> Iterator[tuple[int, Row]]:
        """(input index, row) of its rows: a planned part's own, else those of shard k/n."""
        pairs = getattr(self.reader, "pairs", None)
        if pairs is not None:
            planned: Iterator[tuple[int, Row]] = pairs()
            return planned
        k, n = self.k, self.n
        return ((i, row) for i, row in enumerate(self.reader) if shard_of(row.id, n) == k)

    def progress_total(self, jsonl: Path | None) -> int | None:
        """The rows the progress display counts to: a planned part's, else those of the
        JSONL file ``jsonl`` in this shard (None: not counted)."""
        return count_shard_rows(jsonl, (self.k, self.n)) if jsonl is not None else self.planned

    def write(
        self,
        info: RunInfo,
        outcomes: Sequence[RowOutcome],
        builder: ReportBuilder,
        calls: CallLog,
        texts: dict[str, tuple[str, str]],
    ) -> None:
        """Its result: a planned part's summary with ``texts`` (merged in order by the parent,
        see :mod:`ragbatch.run._summary`), else the partial file of its outcomes."""
        reader = self.reader
        if self.planned is not None:
            write_summary(self.partial, PartSummary(builder, calls, reader.ids, texts))
        else:
            info = replace(info, dataset_sha256=reader.sha256)
            write_partial(self.partial, (self.k, self.n), reader.rows, info, outcomes)


def row_pairs(
    reader: Iterable[Row | Trace], shard: Shard | None
) -> Iterator[tuple[int, Row | Trace]]:
    """(input index, row) of the rows a job evaluates: its shard's, or all."""
    return shard.pairs() if shard is not None else enumerate(reader)


def part_rows(reader: object) -> int | None:
    """The rows of a planned part (its progress total), None for any other reader."""
    rows = getattr(reader, "part_rows", None)
    return rows if isinstance(rows, int) else None


def count_shard_rows(path: Path, shard: tuple[int, int]) -> int | None:
    """Rows of a JSONL file in ``shard`` (K, N), for the progress total; None if the file
    cannot be read or a line is not a row (the reader reports that, at its line)."""
    k, n = shard
    count = 0
    try:
        with path.open("rb") as handle:
            for line in scan_lines(handle):
                if line.strip():
                    row_id = orjson.loads(line.removeprefix(b"\xef\xbb\xbf")).get("id")
                    count += isinstance(row_id, str) and shard_of(row_id, n) == k
    except (OSError, orjson.JSONDecodeError, AttributeError):
        return None
    return count


class PartialHeader(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["ragbatch-partial"] = "ragbatch-partial"
    version: int = PARTIAL_VERSION
    shard: int
    shards: int
    dataset_rows: int
    evaluated_rows: int
    complete: bool
    info: bytes  # RunInfo as JSON (kept as bytes so equality is exact)


def write_partial(
    path: Path,
    shard: tuple[int, int],
    dataset_rows: int,
    info: RunInfo,
    outcomes: Sequence[RowOutcome],
) -> None:
    """Write one shard's outcomes (atomically: a reader never sees half a partial)."""
    header = PartialHeader(
        shard=shard[0],
        shards=shard[1],
        dataset_rows=dataset_rows,
        evaluated_rows=len(outcomes),
        complete=True,
        info=_info().dump_json(info),
    )
    with atomic_file(path) as handle:
        handle.write(header.model_dump_json().encode() + b"\n")
        for outcome in outcomes:
            handle.write(_outcomes().dump_json(outcome) + b"\n")


def read_partial(path: Path) -> tuple[PartialHeader, list[RowOutcome]]:
    try:
        lines = path.read_bytes().splitlines()
    except OSError as exc:
        raise DatasetError(str(path), 0, f"cannot read partial: {exc.strerror or exc}") from None
    if not lines:
        raise DatasetError(str(path), 0, "empty partial file")
    try:
        header = PartialHeader.model_validate_json(lines[0])
    except ValidationError:
        raise DatasetError(str(path), 1, "not a ragbatch partial (bad header)") from None
    outcomes = []
    for number, line in enumerate(lines[1:], start=2):
        try:
            outcomes.append(_outcomes().validate_json(line))
        except ValidationError as exc:
            raise DatasetError(
                str(path), number, f"bad row outcome: {exc.errors()[0]['msg']}"
            ) from None
    if len(outcomes) != header.evaluated_rows:
        raise DatasetError(str(path), 0, "truncated partial: fewer rows than its header says")
    return header, outcomes


def _difference(a: RunInfo, b: RunInfo) -> str | None:
    checks = (
        ("datasets", (a.dataset_name, a.dataset_sha256), (b.dataset_name, b.dataset_sha256)),
        ("policies", a.thresholds, b.thresholds),
        ("pricing snapshots", a.pricing.sha256, b.pricing.sha256),
        (
            "models",
            (a.provider, a.requested_model, a.baseline),
            (b.provider, b.requested_model, b.baseline),
        ),
        ("claim settings", a.claims, b.claims),
        ("metric settings", (a.ks, a.slice_by), (b.ks, b.slice_by)),
    )
    for what, left, right in checks:
        if left != right:
            return f"different {what}: {left} vs {right}"
    return None


def merge_partials(paths: Iterable[Path]) -> tuple[RunInfo, list[RowOutcome]]:
    """Outcomes of every shard in input order, after checking the shards belong together."""
    headers: list[tuple[Path, PartialHeader, RunInfo]] = []
    outcomes: list[RowOutcome] = []
    for path in paths:
        header, rows = read_partial(path)
        headers.append((path, header, _info().validate_json(header.info)))
        outcomes.extend(rows)
    if not headers:
        raise ConfigError("no partial files to merge")
    first_path, first, info = headers[0]
    seen: dict[int, Path] = {}
    for path, header, other in headers:
        problem = _difference(info, other)
        if problem is not None or header.shards != first.shards:
            problem = problem or f"different shard counts: {first.shards} vs {header.shards}"
            raise ConfigError(f"refusing to merge {first_path} and {path}: {problem}")
        if header.shard in seen:
            raise ConfigError(
                f"shard {header.shard}/{header.shards} given twice: {seen[header.shard]} and {path}"
            )
        seen[header.shard] = path
    missing = sorted(set(range(1, first.shards + 1)) - set(seen))
    if missing:
        names = ", ".join(f"{k}/{first.shards}" for k in missing)
        raise ConfigError(f"missing shard(s) {names}: run them (same options) and merge again")
    outcomes.sort(key=lambda o: o.index)
    indices = [o.index for o in outcomes]
    if indices != list(range(first.dataset_rows)):
        raise ConfigError(
            f"the partials hold {len(set(indices))} distinct rows of {first.dataset_rows}: "
            "a shard was evaluated on a different file or twice"
        )
    return info, outcomes
