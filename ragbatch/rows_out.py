"""``--rows-out``: per-row results streamed to JSONL as rows finish, in input order at the end.

Rows are appended as they complete (so a crash leaves everything finished so far on disk),
with their byte offsets kept in memory; when the run ends the file is rewritten in input order
by seeking to each row. Memory stays at a few integers per row.
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
    def __init__(self, path: Path, ks: Sequence[int]) -> None:
        self.path = path
        self.ks = ks
        path.parent.mkdir(parents=True, exist_ok=True)
        self._part = path.with_name(f".{path.name}.part")
        self._handle = self._part.open("wb")
        self._spans: list[tuple[int, int, int]] = []  # (input index, offset, length)

    def on_row(self, outcome: RowOutcome) -> None:
        line = row_json(outcome, self.ks) + b"\n"
        offset = self._handle.tell()
        self._handle.write(line)
        self._handle.flush()
        self._spans.append((outcome.index, offset, len(line)))

    def close(self) -> None:
        """Rewrite in input order and put the file in place."""
        self._handle.close()
        ordered = self.path.with_name(f".{self.path.name}.ordered")
        with self._part.open("rb") as source, ordered.open("wb") as target:
            for _, offset, length in sorted(self._spans):
                source.seek(offset)
                target.write(source.read(length))
        os.replace(ordered, self.path)
        self._part.unlink()
