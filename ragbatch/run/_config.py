"""The defaults of a run's paths, what a run returns, and where rows come from (no I/O)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragbatch.data import DEFAULT_DATASET, RowSource
from ragbatch.report import Report

DEFAULT_OUT = Path("reports/report.json")
# The default snapshot ships inside the package (a copy of the repository's versioned
# pricing/typesafe-2026-12.json, checked byte-identical by a test), so a run works anywhere.
PRICING_NAME = "typesafe-2026-12.json"
DEFAULT_PRICING = Path(__file__).resolve().parents[1] / "pricing" / PRICING_NAME
DEFAULT_CACHE = Path("cache")

__all__ = [
    "DEFAULT_CACHE",
    "DEFAULT_DATASET",
    "DEFAULT_OUT",
    "DEFAULT_PRICING",
    "PRICING_NAME",
    "JobResult",
    "RowSource",
]


@dataclass(frozen=True, repr=False)
class JobResult:
    report: Report
    report_bytes: bytes
    wall_s: float
    rows_per_s: float
    record: dict[str, Any]
    # (question, answer) by row id for the views, when they are still to be written (a merge
    # of --workers shards); None once the run wrote them itself
    texts: Mapping[str, tuple[str, str]] | None = None

    def __repr__(self) -> str:
        # Short on purpose: asyncio may repr the finished task's result, report included.
        return f"JobResult(rows={self.report.dataset.rows}, wall_s={self.wall_s:.3f})"
