"""Trace outcomes without a run: each judged step answered from its ``mock`` block, the
trace's verdict from the policy (docs/semantics.md §8), as the runner builds them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from ragbatch.core import (
    BaselineOutcome,
    JevOutcome,
    RowFailure,
    RowOutcome,
    StepJudgments,
    Thresholds,
    Trace,
    TraceJudged,
    diagnose_trace,
    step_requests,
    trace_decision,
    trace_view,
)

ROOT = Path(__file__).resolve().parents[2]
TRACES = ROOT / "datasets/traces.jsonl"


def committed_traces() -> list[Trace]:
    return [Trace.model_validate_json(line) for line in TRACES.read_bytes().splitlines()]


def trace_of(id: str, steps: list[dict[str, Any]], expected: dict[str, Any] | None = None) -> Trace:
    """A trace from native JSON steps (camelCase, as in the dataset)."""
    line: dict[str, Any] = {"id": id, "steps": steps}
    if expected is not None:
        line["expected"] = expected
    return Trace.model_validate_json(orjson.dumps(line))


def hop(p: float, sufficiency: float = 0.9, **labels: Any) -> dict[str, Any]:
    """A one-document hop whose document is relevant with P(true) ``p``."""
    step: dict[str, Any] = {
        "kind": "retrieval",
        "query": "q",
        "contexts": [{"id": "c", "text": "t"}],
        "mock": {"retrieval": {"chunkRelevance": {"c": p}, "sufficiency": sufficiency,
                               "conflict": 0.05}},
    }  # fmt: skip
    if labels:
        step["expected"] = labels
    return step


def answer(groundedness: float = 0.92, **labels: Any) -> dict[str, Any]:
    step: dict[str, Any] = {
        "kind": "answer",
        "text": "a",
        "mock": {"generation": {"relevance": 0.95, "groundedness": groundedness,
                                "contradiction": 0.04}},
    }  # fmt: skip
    if labels:
        step["expected"] = labels
    return step


def user(text: str = "question?") -> dict[str, Any]:
    return {"kind": "user", "text": text}


def outcome(trace: Trace, index: int = 0, thresholds: Thresholds | None = None) -> RowOutcome:
    """The trace judged from its mock blocks (a failed call: :func:`failed_outcome`)."""
    judgments: dict[int, StepJudgments] = {}
    for asked in step_requests(trace, "mock-jev"):
        mock = trace.steps[asked.step].mock  # type: ignore[union-attr]
        assert mock is not None
        judgments[asked.step] = mock
    verdict = diagnose_trace(trace, judgments, thresholds or Thresholds())
    judged = TraceJudged(trace, judgments, {}, verdict)
    jev = JevOutcome(None, None, verdict.verdict, None, 0.0, trace=judged)
    row = trace_view(trace, verdict.deciding_step)
    return RowOutcome(index, row, trace_decision(trace), jev, BaselineOutcome(None, None))


def failed_outcome(trace: Trace, index: int = 0) -> RowOutcome:
    """The trace whose first step call failed: no judgments, no verdict."""
    judged = TraceJudged(trace, {}, {}, None)
    failure = RowFailure(kind="server-error", message="step 1 (retrieval): 503")
    jev = JevOutcome(None, None, None, failure, 0.0, trace=judged)
    row = trace_view(trace, None)
    return RowOutcome(index, row, trace_decision(trace), jev, BaselineOutcome(None, None))


def committed() -> list[RowOutcome]:
    """The committed traces' outcomes, in input order."""
    return [outcome(t, i) for i, t in enumerate(committed_traces())]
