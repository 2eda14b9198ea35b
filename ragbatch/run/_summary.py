"""A part's summary: what a worker sends back instead of its rows (file and pickle I/O).

A worker evaluating a consecutive range of rows (a planned part, :mod:`ragbatch.run._split`)
folds them into its own report builder and call log as a single run does; the summary is
those two, the part's row ids (for the duplicate check across parts) and, when an HTML view
is asked for, each row's question and answer. The parent merges
the summaries in order (:func:`merge_summaries`): the cost after the last worker ends does
not grow with the rows.
"""

from __future__ import annotations

import pickle
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from ragbatch._files import atomic_file
from ragbatch.report import ReportBuilder, merge_builders
from ragbatch.run._calls import CallLog


@dataclass
class PartSummary:
    builder: ReportBuilder
    calls: CallLog
    ids: list[str]
    texts: dict[str, tuple[str, str]] = field(default_factory=dict)


def write_summary(path: Path, summary: PartSummary) -> None:
    """Pickle ``summary`` to ``path`` atomically (read back only by this run's parent)."""
    with atomic_file(path) as handle:
        pickle.dump(summary, handle, protocol=pickle.HIGHEST_PROTOCOL)


def read_summary(data: bytes) -> PartSummary:
    summary = pickle.loads(data)
    if not isinstance(summary, PartSummary):
        raise TypeError("not a part summary")
    return summary


def _merge_calls(calls: Sequence[CallLog], limit: int | None) -> CallLog:
    whole = calls[0]
    for part in calls[1:]:
        whole.rows += part.rows
        whole.retries.update(part.retries)
        for mine, theirs in (
            (whole.failures.jev, part.failures.jev),
            (whole.failures.baseline, part.failures.baseline),
        ):
            for kind, entry in theirs.items():
                if kind in mine:
                    mine[kind]["rows"] += entry["rows"]
                else:
                    mine[kind] = entry
        first, then = whole.calls, part.calls
        whole.calls = [*first, *then] if first is not None and then is not None else None
    if limit is not None and whole.rows > limit:
        whole.calls = None
    return whole


def merge_summaries(parts: Sequence[PartSummary], limit: int | None) -> PartSummary:
    """The summary of the parts' rows in order; ``limit`` is the run's --max-report-rows."""
    builders = [p.builder for p in parts]
    builders[0].info = replace(builders[0].info, max_report_rows=limit)
    builder = merge_builders(builders)
    calls = _merge_calls([p.calls for p in parts], limit)
    ids = [i for p in parts for i in p.ids]
    return PartSummary(builder, calls, ids, {k: v for p in parts for k, v in p.texts.items()})
