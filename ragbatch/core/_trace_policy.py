"""A trace's step judgments -> a verdict per step and one for the trace (pure: no I/O).

The rules are docs/semantics.md §8. A hop is judged by the retrieval rules of the row table
(conflict, miss, insufficient), an answer by its generation rules (irrelevant, ungrounded,
incorrect), each with the run's thresholds and routing. A failed hop does not fail the trace
when another hop of its turn passed before the answer and the answer is confidently grounded:
it is a recovered, wasted hop. Otherwise the trace's verdict is its first deciding step: the
first confident failure in step order, else its first uncertain step (``showcase``), or the
first step that is not a confident PASS (``guarded``), as the row table walks its rules: a
trace of one hop and one answer gets the verdict of the row made of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ragbatch.core._policy import UNCERTAIN, Thresholds, Verdict
from ragbatch.core._schema import Diagnosis, Route
from ragbatch.core._trace import RetrievalStep, StepJudgments, Trace, turns_of


@dataclass(frozen=True, slots=True)
class StepVerdict:
    """One judged step's verdict; ``recovered``: a failed hop another hop made good;
    ``no_retrieval``: an answer given with no retrieval in its turn before it."""

    step: int
    verdict: Verdict
    recovered: bool = False
    no_retrieval: bool = False


@dataclass(frozen=True, slots=True)
class TraceVerdict:
    """The trace's verdict: its deciding step (None for PASS) and every judged step's."""

    diagnosis: Diagnosis
    confidence: float
    route: Route
    deciding_step: int | None
    steps: tuple[StepVerdict, ...]

    @property
    def first_failing_step(self) -> int | None:
        """The deciding step when the trace failed; None for PASS and JUDGE_UNCERTAIN."""
        failed = self.diagnosis not in ("PASS", "JUDGE_UNCERTAIN")
        return self.deciding_step if failed else None

    @property
    def wasted_hops(self) -> int:
        return sum(1 for s in self.steps if s.recovered)

    @property
    def verdict(self) -> Verdict:
        """The trace's verdict as a row's: what routing, the cascade and the metrics read."""
        return Verdict(self.diagnosis, self.confidence, self.route)


def _band(t: Thresholds, name: str, p: float) -> bool:
    fail, pass_ = t.bounds[name]
    return fail < p < pass_


def hop_verdict(j: StepJudgments, t: Thresholds) -> Verdict:
    """Rules 1-3 of the row table on one hop's documents (§8)."""
    r = j.retrieval
    conflict = _need(r.conflict, "conflict")
    sufficiency = _need(r.sufficiency, "sufficiency")
    best = max(r.chunk_relevance.values()) if r.chunk_relevance else None
    b = t.bounds
    if conflict >= b["contextConflict"][1]:
        return Verdict("CONFLICTING_EVIDENCE", conflict, "auto")
    if t.routing == "guarded" and not conflict <= b["contextConflict"][0]:
        return UNCERTAIN
    if best is None:
        return Verdict("RETRIEVAL_MISS", 1.0, "auto")
    if best <= b["chunkRelevance"][0]:
        return Verdict("RETRIEVAL_MISS", 1.0 - best, "auto")
    if t.routing == "guarded" and not best >= b["chunkRelevance"][1]:
        return UNCERTAIN
    if sufficiency <= b["contextSufficiency"][0]:
        return Verdict("RETRIEVAL_INSUFFICIENT", 1.0 - sufficiency, "auto")
    signals = (("contextConflict", conflict), ("chunkRelevance", best))
    if any(_band(t, n, p) for n, p in (*signals, ("contextSufficiency", sufficiency))):
        return UNCERTAIN
    return Verdict("PASS", min(sufficiency, 1.0 - conflict), "auto")


def answer_verdict(j: StepJudgments, t: Thresholds, has_evidence: bool) -> Verdict:
    """Rules 4-6 of the row table on one answer (§8); no retrieval before it in its turn is
    rule 2's miss, as for a row without contexts."""
    if not has_evidence:
        return Verdict("RETRIEVAL_MISS", 1.0, "auto")
    g = j.generation
    relevance = _need(g.relevance, "relevance")
    grounded = _need(g.groundedness, "groundedness")
    contradiction = _need(g.contradiction, "contradiction")
    correctness = g.correctness
    b = t.bounds
    guarded = t.routing == "guarded"
    if relevance <= b["answerRelevance"][0]:
        return Verdict("ANSWER_IRRELEVANT", 1.0 - relevance, "auto")
    if guarded and not relevance >= b["answerRelevance"][1]:
        return UNCERTAIN
    if grounded <= b["groundedness"][0] or contradiction >= b["contradiction"][1]:
        return Verdict("GENERATOR_UNGROUNDED", max(1.0 - grounded, contradiction), "auto")
    if guarded and not is_grounded(j, t):
        return UNCERTAIN
    if correctness is not None and correctness <= b["correctness"][0]:
        return Verdict("ANSWER_INCORRECT", 1.0 - correctness, "auto")
    signals = [("answerRelevance", relevance), ("groundedness", grounded)]
    signals.append(("contradiction", contradiction))
    if correctness is not None:
        signals.append(("correctness", correctness))
    if any(_band(t, n, p) for n, p in signals):
        return UNCERTAIN
    passing = [relevance, grounded, 1.0 - contradiction]
    if correctness is not None:
        passing.append(correctness)
    return Verdict("PASS", min(passing), "auto")


def is_grounded(j: StepJudgments, t: Thresholds) -> bool:
    """The answer is confidently grounded: groundedness high and contradiction low."""
    g, b = j.generation, t.bounds
    grounded = _need(g.groundedness, "groundedness")
    contradiction = _need(g.contradiction, "contradiction")
    return grounded >= b["groundedness"][1] and contradiction <= b["contradiction"][0]


def diagnose_trace(
    trace: Trace, judgments: Mapping[int, StepJudgments], t: Thresholds
) -> TraceVerdict:
    """Every judged step's verdict and the trace's (§8); ``judgments`` by step index."""
    verdicts: dict[int, StepVerdict] = {}
    candidates: list[int] = []  # the steps that may decide the trace, in step order
    for turn in turns_of(trace):
        segment_start = turn.user
        for answer in turn.answers:
            before = [h for h in turn.hops if h < answer]
            for hop in before:
                if hop not in verdicts:
                    verdicts[hop] = StepVerdict(hop, hop_verdict(judgments[hop], t))
            segment = [h for h in before if h > segment_start]
            has_evidence = any(_has_documents(trace, h) for h in before)
            verdict = answer_verdict(judgments[answer], t, has_evidence)
            verdicts[answer] = StepVerdict(answer, verdict, no_retrieval=not before)
            found = any(verdicts[h].verdict.diagnosis == "PASS" for h in before)
            if found and is_grounded(judgments[answer], t):
                for hop in segment:
                    if verdicts[hop].verdict.diagnosis != "PASS":
                        verdicts[hop] = StepVerdict(hop, verdicts[hop].verdict, recovered=True)
                candidates.append(answer)
            else:
                candidates += [*segment, answer]
            segment_start = answer
    steps = tuple(verdicts[i] for i in sorted(verdicts))
    return _resolve(candidates, verdicts, t, steps)


def _resolve(
    candidates: list[int],
    verdicts: Mapping[int, StepVerdict],
    t: Thresholds,
    steps: tuple[StepVerdict, ...],
) -> TraceVerdict:
    def decided(index: int) -> TraceVerdict:
        v = verdicts[index].verdict
        return TraceVerdict(v.diagnosis, v.confidence, v.route, index, steps)

    if t.routing == "guarded":
        for index in candidates:
            if verdicts[index].verdict.diagnosis != "PASS":
                return decided(index)
    else:
        for index in candidates:
            if verdicts[index].verdict.diagnosis not in ("PASS", "JUDGE_UNCERTAIN"):
                return decided(index)
        for index in candidates:
            if verdicts[index].verdict.diagnosis == "JUDGE_UNCERTAIN":
                return decided(index)
    confidence = min(s.verdict.confidence for s in steps if s.verdict.diagnosis == "PASS")
    return TraceVerdict("PASS", confidence, "auto", None, steps)


def _has_documents(trace: Trace, hop: int) -> bool:
    step = trace.steps[hop]
    return isinstance(step, RetrievalStep) and bool(step.contexts)


def _need(value: float | None, name: str) -> float:
    if value is None:
        raise ValueError(f"judgment {name} missing")  # a bug: requests always ask it
    return value
