"""``--rows-out``: per-row results streamed to JSONL in input order as rows complete.

The runner hands rows on in input order (a row finished early waits in its bounded reordering
window), so the file is written straight through: nothing per row is kept in memory.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from ragbatch.golden_eval import row_check, row_ranking
from ragbatch.outcome import RowOutcome
from ragbatch.row_results import row_result
from ragbatch.summarize import baseline_decided, cascade_decided, jev_decided


def row_json(outcome: RowOutcome, ks: Sequence[int]) -> bytes:
    """One row's result, exactly as it appears in the report's ``rows[]``."""
    jev, base = jev_decided(outcome), baseline_decided(outcome)
    verdict = outcome.jev.verdict
    routed = verdict is not None and verdict.route == "fallback"
    result = row_result(
        outcome,
        base,
        cascade_decided(jev, base, routed),
        routed,
        row_ranking(outcome, ks),
        row_check(outcome),
    )
    return result.model_dump_json(by_alias=True, exclude_none=True).encode()


class RowsWriter:
    """Appends each row's result as the runner hands it on (input order) and flushes, so a
    crash leaves every row before it on disk; the file appears under its name at the end."""

    def __init__(self, path: Path, ks: Sequence[int]) -> None:
        self.path = path
        self.ks = ks
        path.parent.mkdir(parents=True, exist_ok=True)
        self._part = path.with_name(f".{path.name}.part")
        self._handle = self._part.open("wb")

    def write(self, outcome: RowOutcome) -> None:
        self._handle.write(row_json(outcome, self.ks) + b"\n")
        self._handle.flush()

    def close(self) -> None:
        self._handle.close()
        os.replace(self._part, self.path)
