"""A multi-step trace's report row as calibration reads it (pure: no I/O).

The trace's step structure is rebuilt from the row's ``steps`` (their kinds and order; a hop's
documents are its ``chunkRelevance`` ids, so a hop without any is a miss) and checked as a
dataset's trace is; the answers of every step its verdict reads (docs/semantics.md §8: its
answers, and the hops before an answer of their turn) are laid out in step order, each step's
in ``JUDGMENTS`` order, for :class:`ragbatch.calibrate._trace_plan.TracePlan`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from ragbatch.calibrate._rules import (
    CHUNK,
    CONFLICT,
    CONTRADICTION,
    CORRECTNESS,
    GROUNDED,
    RELEVANCE,
    SUFFICIENCY,
    Signals,
)
from ragbatch.calibrate._trace_plan import JudgedStep, TracePlan
from ragbatch.core import ConfigError, GenerationJudgments, HopRetrieval, Trace, turns_of

_HOP = (CHUNK, SUFFICIENCY, CONFLICT)  # the judgments of a hop, in JUDGMENTS order
_ANSWER = (RELEVANCE, GROUNDED, CONTRADICTION, CORRECTNESS)


def trace_plan(row_id: str, steps: Sequence[Any]) -> tuple[Signals, TracePlan]:
    """A report row's ``steps`` (:class:`ragbatch.report.StepResult` views) as signals and a
    plan; ConfigError naming the row when the steps do not make a trace or a step the policy
    reads lacks a judgment."""
    trace = _rebuild(row_id, steps)
    read = sorted(
        {i for turn in turns_of(trace) for a in turn.answers for i in (*turn.hops, a) if i <= a}
    )
    signals: list[float] = []
    judged: list[JudgedStep] = []
    for index in read:
        step = steps[index]
        answers = _hop(row_id, step) if step.kind == "retrieval" else _answer(row_id, step)
        slots = tuple(j for j, p in answers)
        judged.append(JudgedStep(index, step.kind, len(signals), slots, step.expected))
        signals += [p for _, p in answers]
    return tuple(signals), TracePlan(trace, tuple(judged), tuple(signals))


def _rebuild(row_id: str, steps: Sequence[Any]) -> Trace:
    """The trace's step structure: kinds in order, a hop's contexts by id, no text."""
    out: list[dict[str, Any]] = []
    for position, step in enumerate(steps):
        if step.index != position:
            raise ConfigError(
                f"row {row_id}: steps[{position}] has index {step.index}; a trace row lists "
                "its steps in order (was the report produced by ragbatch run?)"
            )
        if step.kind == "retrieval":
            chunks = step.retrieval.chunk_relevance if step.retrieval else {}
            contexts = [{"id": cid, "text": ""} for cid in chunks]
            out.append({"kind": "retrieval", "query": "", "contexts": contexts})
        elif step.kind == "tool":
            out.append({"kind": "tool", "name": "tool"})
        else:
            out.append({"kind": step.kind, "text": ""})
    try:
        return Trace.model_validate({"id": row_id, "steps": out})
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise ConfigError(
            f"row {row_id}: {where}: {first['msg']} (was the report produced by ragbatch run?)"
        ) from None


def _hop(row_id: str, step: Any) -> list[tuple[int, float]]:
    r = step.retrieval or HopRetrieval()
    best = max(r.chunk_relevance.values()) if r.chunk_relevance else None
    values = {CHUNK: best, SUFFICIENCY: r.sufficiency, CONFLICT: r.conflict}
    _need(row_id, step.index, "retrieval.sufficiency", r.sufficiency)
    _need(row_id, step.index, "retrieval.conflict", r.conflict)
    return [(j, p) for j in _HOP if (p := values[j]) is not None]


def _answer(row_id: str, step: Any) -> list[tuple[int, float]]:
    g = step.generation or GenerationJudgments()
    values = {
        RELEVANCE: g.relevance,
        GROUNDED: g.groundedness,
        CONTRADICTION: g.contradiction,
        CORRECTNESS: g.correctness,
    }
    _need(row_id, step.index, "generation.relevance", g.relevance)
    _need(row_id, step.index, "generation.groundedness", g.groundedness)
    _need(row_id, step.index, "generation.contradiction", g.contradiction)
    return [(j, p) for j in _ANSWER if (p := values[j]) is not None]


def _need(row_id: str, index: int, name: str, value: float | None) -> None:
    if value is None:
        raise ConfigError(
            f"row {row_id}: step {index}: judgment {name} is missing; calibration needs every "
            "judgment of the steps a successful trace's verdict reads (was the report "
            "produced by ragbatch run?)"
        )
