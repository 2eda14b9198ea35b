"""Synthetic labelled multi-step traces of known calibration, for the calibration tests.

Every judgment of every step gets an answer p (arcsine-like, as the rows of
``tests.calibrate.test_calibrate.synthetic``) and a truth ~ Bernoulli(p); a trace's label is
the trace policy's diagnosis of its 0/1 truths (docs/semantics.md §8), each judged step's label
its verdict there. So Jev is calibrated and its verdict is sometimes wrong, as a real judge's.
"""

from __future__ import annotations

import random
from typing import Any

from ragbatch.core import StepJudgments, Thresholds, Trace, diagnose_trace

TRUTH = Thresholds()  # 0/1 truths: never in any band, so a label is never uncertain


def synthetic_traces(n: int, seed: int, prefix: str = "t", coarse: bool = False) -> list[Trace]:
    """``n`` traces of one or two turns. A turn has one answer, sometimes two (each after its
    own hops), zero to three hops before an answer (a hop rarely returns no document),
    sometimes a tool call, and rarely a hop after its last answer (which no verdict reads); a
    trace's final answer is checked against a reference half of the time. Each step's
    ``mock`` block is Jev's answer; ``coarse``: answers on a 0.1 grid, 0 and 1 included, so
    that thresholds meet them exactly."""
    rng = random.Random(seed)
    out: list[Trace] = []
    for i in range(n):
        b = _Builder(rng, coarse)
        turns = 1 if rng.random() < 0.7 else 2
        reference = rng.random() < 0.5
        for turn in range(turns):
            b.steps.append({"kind": "user", "text": f"Question {turn} of trace {i}?"})
            answers = 1 if rng.random() < 0.8 else 2
            for a in range(answers):
                for h in range(rng.choice((0, 1, 1, 1, 1, 2, 2, 2, 3, 3))):
                    b.hop(f"d{turn}-{a}-{h}")
                b.answer(reference and turn == turns - 1 and a == answers - 1)
            if rng.random() < 0.05:
                b.hop(f"d{turn}-after")
        data: dict[str, Any] = {"id": f"{prefix}{i:05d}", "steps": b.steps}
        if reference:
            data["referenceAnswer"] = "The reference."
        labels = _labels(Trace.model_validate(data), b.truths)
        out.append(Trace.model_validate({**data, **labels}))
    return out


class _Builder:
    """One trace's steps (JSON) and the truths of its judged steps, by step index."""

    def __init__(self, rng: random.Random, coarse: bool) -> None:
        self.rng, self.coarse = rng, coarse
        self.steps: list[dict[str, Any]] = []
        self.truths: dict[int, dict[str, Any]] = {}

    def p(self, a: float = 0.3, b: float = 0.3) -> float:
        """An answer: arcsine-like by default, kept off 0 and 1 unless coarse."""
        if self.coarse:
            return round(self.rng.betavariate(a, b), 1)
        return min(0.999, max(0.001, round(self.rng.betavariate(a, b), 3)))

    def truth(self, q: float) -> float:
        return float(self.rng.random() < q)

    def hop(self, name: str) -> None:
        docs = 0 if self.rng.random() < 0.03 else self.rng.randint(1, 3)
        ids = [f"{name}-{k}" for k in range(docs)]
        chunks = {d: self.p() for d in ids}
        sufficiency = self.p()
        conflict = self.p(0.2, 0.8) if docs else 0.0  # conflicts are rarer
        self.truths[len(self.steps)] = {
            "chunkRelevance": {d: self.truth(q) for d, q in chunks.items()},
            "sufficiency": self.truth(sufficiency),
            "conflict": self.truth(conflict),
        }
        mock = {"chunkRelevance": chunks, "sufficiency": sufficiency, "conflict": conflict}
        contexts = [{"id": d, "text": f"Passage {d}."} for d in ids]
        self.steps.append(
            {"kind": "retrieval", "query": name, "contexts": contexts, "mock": {"retrieval": mock}}
        )
        if self.rng.random() < 0.15:
            self.steps.append({"kind": "tool", "name": "lookup", "input": {"hop": name}})

    def answer(self, checked: bool) -> None:
        said = {"relevance": self.p(), "groundedness": self.p(), "contradiction": self.p(0.2, 0.8)}
        if checked:
            said["correctness"] = self.p()
        self.truths[len(self.steps)] = {k: self.truth(q) for k, q in said.items()}
        self.steps.append({"kind": "answer", "text": "An answer.", "mock": {"generation": said}})


def _labels(trace: Trace, truths: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """The trace's label and its judged steps' from the policy on the truths."""
    judgments = {i: _judgments(trace, i, t) for i, t in truths.items()}
    verdict = diagnose_trace(trace, judgments, TRUTH)
    steps = [step.model_dump(by_alias=True, exclude_none=True) for step in trace.steps]
    for v in verdict.steps:
        steps[v.step]["expected"] = {"diagnosis": v.verdict.diagnosis}
    return {
        "steps": steps,
        "expected": {
            "diagnosis": verdict.diagnosis,
            "firstFailingStep": verdict.first_failing_step,
        },
    }


def _judgments(trace: Trace, index: int, truth: dict[str, Any]) -> StepJudgments:
    kind = trace.steps[index].kind
    return StepJudgments.model_validate(
        {"retrieval": truth} if kind == "retrieval" else {"generation": truth}
    )


def mock_judgments(trace: Trace) -> dict[int, StepJudgments]:
    """Jev's answers of every step that has them (its ``mock`` block)."""
    out: dict[int, StepJudgments] = {}
    for i, step in enumerate(trace.steps):
        mock = getattr(step, "mock", None)
        if mock is not None:
            out[i] = mock
    return out


def report_rows(traces: list[Trace], thresholds: Thresholds = TRUTH) -> list[dict[str, Any]]:
    """The traces as ``ragbatch run`` reports them (the fields calibration reads), diagnosed
    at ``thresholds``."""
    rows = []
    for trace in traces:
        judged = mock_judgments(trace)
        verdict = diagnose_trace(trace, judged, thresholds)
        by_step = {v.step: v.verdict for v in verdict.steps}
        turn = -1
        steps: list[dict[str, Any]] = []
        for index, step in enumerate(trace.steps):
            turn += step.kind == "user"
            entry: dict[str, Any] = {"index": index, "kind": step.kind, "turn": turn}
            j = judged.get(index)
            if j is not None:
                dumped = j.model_dump(by_alias=True, exclude_none=True)
                block = "retrieval" if step.kind == "retrieval" else "generation"
                entry[block] = dumped[block]
            if index in by_step:
                entry["diagnosis"] = by_step[index].diagnosis
                entry["confidence"] = by_step[index].confidence
            expected = getattr(step, "expected", None)
            if expected is not None and expected.diagnosis is not None:
                entry["expected"] = expected.diagnosis
            steps.append(entry)
        assert trace.expected is not None
        rows.append(
            {
                "id": trace.id,
                "status": "ok",
                "diagnosis": verdict.diagnosis,
                "confidence": verdict.confidence,
                "route": verdict.route,
                "expected": trace.expected.diagnosis,
                "steps": steps,
            }
        )
    return rows


def dataset_lines(traces: list[Trace]) -> bytes:
    """The traces as a native JSONL dataset (mock blocks and labels kept)."""
    return b"".join(
        trace.model_dump_json(by_alias=True, exclude_none=True).encode() + b"\n" for trace in traces
    )
