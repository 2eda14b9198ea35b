"""The labelled rows and multi-step traces of a report, read through the report's own
models (pure).

Each row is read through :func:`ragbatch.calibrate._row_view.row_view` (the report's own
models), not by string keys. A trace counts when it carries its own label (``expected``, the
trace's diagnosis): the guarantee is about what is routed, and a trace is routed whole
(docs/semantics.md §5); its steps' labels feed the per-judgment estimates only.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ragbatch.calibrate._row_view import row_view, signals_from
from ragbatch.calibrate._rules import Signals
from ragbatch.calibrate._trace_plan import TracePlan
from ragbatch.calibrate._trace_row import trace_plan
from ragbatch.core import ConfigError


@dataclass(frozen=True, slots=True)
class Labelled:
    """One successful row or trace with an expected diagnosis, as calibration needs it."""

    id: str
    signals: Signals
    expected: str
    diagnosis: str | None
    confidence: float
    trace: TracePlan | None = None


def labelled(rows: Sequence[Mapping[str, Any]]) -> list[Labelled]:
    """The successful rows and traces with an expected diagnosis, in order.

    Raises :class:`ConfigError` on a claim-mode row, a missing judgment, or a row that does
    not match the report schema (naming the row).
    """
    out: list[Labelled] = []
    for raw in rows:
        row = row_view(raw)
        if row.status != "ok" or row.expected is None:
            continue  # failed or unlabelled: calibration does not read them
        if row.claim_summary is not None:
            raise ConfigError(
                f"row {row.id}: claim-mode rows cannot be calibrated yet (their "
                "groundedness comes from claim verdicts); calibrate a basic-mode report"
            )
        plan = None
        if row.steps is not None:
            signals, plan = trace_plan(row.id, row.steps)
        else:
            signals = signals_from(row.id, row.retrieval, row.generation)
        out.append(
            Labelled(row.id, signals, str(row.expected), row.diagnosis, row.confidence or 0.0, plan)
        )
    return out


def labelled_answers(
    signals: Signals, expected: str, trace: TracePlan | None
) -> Iterator[tuple[int, float, str, Signals]]:
    """Each answer with what labels it: (judgment index, answer, the diagnosis that labels
    it, the signals beside it). A row's answers carry the row's label; a trace's carry their
    step's own label, and a step without one is left out (a trace's label does not say which
    of its steps' answers were right)."""
    if trace is None:
        for j, p in enumerate(signals):
            if p is not None:
                yield j, p, expected, signals
        return
    for step in trace.steps:
        if step.expected is None:
            continue
        beside = step.signals(signals)
        for j in step.slots:
            p = beside[j]
            assert p is not None
            yield j, p, step.expected, beside
