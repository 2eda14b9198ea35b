"""The Python API for notebooks: evaluate rows in memory, get the typed report back (I/O).

    import ragbatch
    report = ragbatch.evaluate([{"id": "r1", "question": ..., "contexts": [...], ...}])
    report.modes.jev_only.classification.accuracy

Options are the fields of :class:`ragbatch.run.job.JobConfig` (the same as ``ragbatch run``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Mapping
from contextlib import closing
from dataclasses import fields, replace
from os import PathLike
from pathlib import Path
from typing import Any

import anyio
import orjson
from pydantic import ValidationError

from ragbatch.core.errors import DatasetError
from ragbatch.core.policy import Thresholds, routing_of
from ragbatch.core.schema import Row
from ragbatch.data.jsonl import SeenIds, describe
from ragbatch.report.models import Report
from ragbatch.run.job import JobConfig
from ragbatch.run.job import evaluate_async as _evaluate_job


class MemoryRows:
    """Rows given as ``Row`` objects or plain dicts (dataset field names), checked like a file."""

    def __init__(self, rows: Iterable[Row | Mapping[str, Any]], name: str = "<memory>") -> None:
        self._rows = rows
        self.name = name
        self.rows = 0
        self._digest = hashlib.sha256()

    @property
    def sha256(self) -> str:
        return self._digest.hexdigest()

    def __iter__(self) -> Iterator[Row]:
        with closing(SeenIds()) as ids:
            for number, item in enumerate(self._rows, start=1):
                try:
                    row = item if isinstance(item, Row) else Row.model_validate(dict(item))
                except ValidationError as exc:
                    raise DatasetError(self.name, number, describe(exc)) from None
                if not ids.add(row.id):
                    raise DatasetError(self.name, number, f"duplicate row id {row.id!r}")
                self._digest.update(
                    orjson.dumps(
                        row.model_dump(mode="json", by_alias=True, exclude_none=True),
                        option=orjson.OPT_SORT_KEYS,
                    )
                    + b"\n"
                )
                self.rows += 1
                yield row
        if self.rows == 0:
            raise DatasetError(self.name, 0, "no rows given")


# Options that name files: a notebook passes plain strings ("rows.jsonl"), the job wants Paths.
PATH_OPTIONS = frozenset(f.name for f in fields(JobConfig) if "Path" in str(f.type))


async def evaluate_async(rows: Iterable[Row | Mapping[str, Any]], **options: Any) -> Report:
    """Evaluate rows inside a running event loop (Jupyter: ``await ragbatch.evaluate_async(...)``)."""
    options.setdefault("out", None)
    if "routing" in options:  # the CLI's --routing: how the thresholds walk the precedence
        thresholds = options.get("thresholds", Thresholds())
        options["thresholds"] = replace(thresholds, routing=routing_of(options.pop("routing")))
    options = {
        name: Path(value) if name in PATH_OPTIONS and isinstance(value, str | PathLike) else value
        for name, value in options.items()
    }
    config = replace(JobConfig(), **options, source=MemoryRows(rows))
    return (await _evaluate_job(config)).report


def evaluate(rows: Iterable[Row | Mapping[str, Any]], **options: Any) -> Report:
    """Evaluate rows and return the typed report (runs its own event loop)."""
    report: Report = anyio.run(lambda: evaluate_async(rows, **options))
    return report
