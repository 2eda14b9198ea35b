"""The labelled rows of a report, read through the report's own models (pure).

Each row is read through :func:`ragbatch.calibrate._row_view.row_view` (the report's own
models), not by string keys.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ragbatch.calibrate._row_view import row_view, signals_from
from ragbatch.calibrate._rules import Signals
from ragbatch.core import ConfigError


@dataclass(frozen=True, slots=True)
class Labelled:
    """One successful row with an expected diagnosis, as calibration needs it."""

    id: str
    signals: Signals
    expected: str
    diagnosis: str | None
    confidence: float


def labelled(rows: Sequence[Mapping[str, Any]]) -> list[Labelled]:
    """The successful rows with an expected diagnosis, in order.

    Raises :class:`ConfigError` on a claim-mode row, a missing judgment, or a row that does
    not match the report schema (naming the row).
    """
    out: list[Labelled] = []
    for raw in rows:
        row = row_view(raw)
        if row.steps is not None and (row.expected is not None or _labels_a_step(row)):
            raise ConfigError(
                f"row {row.id}: a multi-step trace cannot be calibrated yet: the search "
                "re-diagnoses a row from one set of judgments, a trace's verdict composes its "
                "steps' (docs/semantics.md §8a); calibrate on a report of labelled rows"
            )
        if row.status != "ok" or row.expected is None:
            continue  # failed or unlabelled: calibration does not read them
        if row.claim_summary is not None:
            raise ConfigError(
                f"row {row.id}: claim-mode rows cannot be calibrated yet (their "
                "groundedness comes from claim verdicts); calibrate a basic-mode report"
            )
        signals = signals_from(row.id, row.retrieval, row.generation)
        out.append(
            Labelled(row.id, signals, str(row.expected), row.diagnosis, row.confidence or 0.0)
        )
    return out


def _labels_a_step(row: Any) -> bool:
    return any(step.expected is not None for step in row.steps)
