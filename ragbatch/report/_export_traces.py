"""Where a trace's verdict and its failing step go in a tracing tool (pure: a row in, ids and
texts out). :mod:`ragbatch.report._export` writes the records.

A trace's row (docs/semantics.md §8) names its spans: ``spans.root`` (the trace's root span),
and each step its own ``span``; a session read from spans has no one root, and its turns are
traces of their own, listed in ``metadata.traces`` in turn order (the span readers' shape, its
id the session id).

- The trace's verdict goes on its root span (Phoenix), else on the root of its deciding turn
  (that turn's user step's span), else on the deciding answer's span; in Langfuse, on the
  trace, or on the session when the row is one.
- The *annotated step* is the first failing step, or the deciding step when the trace is
  JUDGE_UNCERTAIN (the step Jev could not decide); a passing trace has none. It goes on the
  step's own span (Phoenix) or observation (Langfuse, on its turn's trace); a step without a
  span id goes where the trace's verdict goes, and its explanation says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

UNCERTAIN = "JUDGE_UNCERTAIN"
NO_SPAN = "the step has no span id: on the trace's own span"
NO_OBSERVATION = "the step has no span id: on its trace"


def is_trace(row: Mapping[str, Any]) -> bool:
    return isinstance(row.get("steps"), list)


def step_at(row: Mapping[str, Any], index: Any) -> dict[str, Any] | None:
    if not isinstance(index, int):
        return None
    return next((s for s in row["steps"] if s.get("index") == index), None)


def annotated_step(row: Mapping[str, Any]) -> dict[str, Any] | None:
    """The first failing step; the deciding step of an uncertain trace; else None."""
    index = row.get("firstFailingStep")
    if index is None and row.get("diagnosis") == UNCERTAIN:
        index = row.get("decidingStep")
    step = step_at(row, index)
    return step if step is not None and isinstance(step.get("diagnosis"), str) else None


def deciding_turn(row: Mapping[str, Any]) -> int:
    """The turn the trace's verdict is about: its deciding step's, else its last."""
    step = step_at(row, row.get("decidingStep"))
    turns = [s.get("turn", 0) for s in row["steps"]]
    return int(step.get("turn", 0)) if step is not None else int(max(turns, default=0))


def trace_span(row: Mapping[str, Any]) -> str | None:
    """The span the trace's verdict goes on (Phoenix)."""
    spans = row.get("spans") or {}
    if spans.get("root"):
        return str(spans["root"])
    turn = deciding_turn(row)
    user = next((s for s in row["steps"] if s["kind"] == "user" and s.get("turn") == turn), None)
    if user is not None and user.get("span"):
        return str(user["span"])
    return str(spans["llm"]) if spans.get("llm") else None


def turn_traces(row: Mapping[str, Any]) -> list[str] | None:
    """A session's trace ids, one a turn in order; None for a row that is not one."""
    traces = (row.get("metadata") or {}).get("traces")
    if not isinstance(traces, list) or not all(isinstance(t, str) and t for t in traces):
        return None
    return traces if len(traces) == row.get("turns") else None


def trace_subject(row: Mapping[str, Any]) -> dict[str, Any] | None:
    """What the trace's Langfuse scores name: its trace, else its session; None: neither."""
    if row.get("traceId"):
        return {"traceId": row["traceId"], "observationId": None}
    if turn_traces(row) is not None:
        return {"sessionId": row["id"]}
    return None


def step_subject(row: Mapping[str, Any], step: Mapping[str, Any]) -> dict[str, Any] | None:
    """The step's Langfuse trace and observation; None when its turn's trace is not known."""
    traces = turn_traces(row)
    trace_id = row.get("traceId") or (traces[step["turn"]] if traces is not None else None)
    if not trace_id:
        return None
    return {"traceId": trace_id, "observationId": step.get("span")}


def trace_note(row: Mapping[str, Any]) -> str:
    """The trace's first failing (or deciding) step, as a comment reads it."""
    step = step_at(row, row.get("firstFailingStep"))
    role = "first failing step"
    if step is None:
        step, role = step_at(row, row.get("decidingStep")), "deciding step"
    if step is None:
        hops, turns = row.get("hops"), row.get("turns")
        return f"no step failed ({hops} hops, {turns} turns)"
    return f"{role} {step['index']} ({step_name(row, step)})"


def step_name(row: Mapping[str, Any], step: Mapping[str, Any]) -> str:
    """``retrieval hop``, and ``in turn 2 of 3`` when there are several (the report counts
    steps and turns from 0; words count turns from 1)."""
    kind = "retrieval hop" if step["kind"] == "retrieval" else str(step["kind"])
    turns = row.get("turns")
    if not isinstance(turns, int) or turns < 2:
        return kind
    return f"{kind} in turn {int(step.get('turn', 0)) + 1} of {turns}"


def step_explanation(row: Mapping[str, Any], step: Mapping[str, Any], shown: Any) -> str:
    """The annotated step's verdict in words (``shown`` rounds numbers)."""
    first = row.get("firstFailingStep") == step["index"]
    said = (
        f"step {step['index']} ({step_name(row, step)}): {step['diagnosis']} (confidence "
        f"{shown(step.get('confidence'))}), the trace's "
        + ("first failing step" if first else "deciding step")
    )
    return said + ("; no retrieval before it in its turn" if step.get("noRetrieval") else "")


def step_metadata(row: Mapping[str, Any], step: Mapping[str, Any]) -> dict[str, Any]:
    """What a reader of a step's annotation needs to find it and see why (no texts)."""
    meta: dict[str, Any] = {
        "row_id": row.get("id"),
        "step": step["index"],
        "kind": step["kind"],
        "turn": step.get("turn"),
        "decision": step.get("decisionId"),
        "confidence": step.get("confidence"),
        "trace_diagnosis": row.get("diagnosis"),
        "no_retrieval": step.get("noRetrieval"),
    }
    for part in ("retrieval", "generation"):
        if step.get(part):
            meta[part] = step[part]
    return {key: value for key, value in meta.items() if value is not None}


def trace_metadata(row: Mapping[str, Any]) -> dict[str, Any]:
    """A trace's own fields, beside a row's, on its verdict's annotation."""
    keys = ("decidingStep", "firstFailingStep", "hops", "turns", "wastedHops")
    names = ("deciding_step", "first_failing_step", "hops", "turns", "wasted_hops")
    return {n: row[k] for k, n in zip(keys, names, strict=True) if row.get(k) is not None}
