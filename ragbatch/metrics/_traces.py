"""Trace metrics: where multi-step traces fail, by step kind, hop position and turn (pure).

The ``traces`` section of the report (docs/semantics.md §8a), present only when a run has
traces: the first failing step by kind and diagnosis, every judged step's verdict tallied by
its hop position within its turn and by its turn, wasted (recovered) hops, answers given with
no retrieval, hops and turns per trace, the first failing step against its labels, and each
judged step against its own labels (classification and component metrics).

:class:`TraceMetricsAccumulator` takes one outcome at a time and keeps counts and exact sums,
never the traces, so memory grows with the longest trace, not with the rows; its attributes
are of the types :mod:`ragbatch.report._merge` adds up, so shards of a run merge exactly. Every figure
but the step classification's label order (first appearance, as in §3) is the same for any
row order.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from ragbatch.core import (
    DIAGNOSES,
    AnswerStep,
    RetrievalStep,
    RowOutcome,
    StepJudgments,
    StepVerdict,
    Trace,
    TraceJudged,
    turns_of,
)
from ragbatch.metrics._scores import (
    Classification,
    ClassificationCounts,
    Component,
    ComponentCounts,
    ExactSum,
    Out,
    safe,
)

TRACE_METRICS_VERSION = "1"
KINDS = ("retrieval", "answer")  # the judged step kinds
NOT_FAILED = ("PASS", "JUDGE_UNCERTAIN")
STEP_JUDGMENTS: dict[str, tuple[str, ...]] = {
    "retrieval": ("chunkRelevance", "contextSufficiency", "contextConflict"),
    "answer": ("answerRelevance", "groundedness", "contradiction", "correctness"),
}


class StepTally(Out):
    """Judged steps of one kind at one place: their verdicts, and how many traces first
    failed there."""

    judged: int
    passed: int
    failed: int  # a failure diagnosis (neither PASS nor JUDGE_UNCERTAIN), recovered included
    uncertain: int
    failure_rate: float  # failed / judged
    first_failing: int  # traces whose first failing step is one of these


class HopPosition(Out):
    """The hops at one position within their turn (0: the turn's first hop)."""

    hop: int
    judged: int
    passed: int
    failed: int
    uncertain: int
    recovered: int  # failed hops another hop of their turn made good (wasted hops)
    failure_rate: float
    first_failing: int


class TurnTally(Out):
    """The judged steps of one turn index (0: the first turn) over the traces that have it."""

    turn: int
    traces: int
    retrieval: StepTally
    answer: StepTally


class FirstFailingKind(Out):
    traces: int
    by_diagnosis: dict[str, int]  # in the order of the diagnoses (docs/semantics.md §2)


class FirstFailing(Out):
    """The traces that failed, by the kind of their first failing step and its diagnosis."""

    traces: int
    rate: float  # traces / judged traces
    by_kind: dict[str, FirstFailingKind]  # retrieval, answer
    no_retrieval: int  # first failing steps that are answers with no retrieval before them


class WastedHops(Out):
    hops: int  # judged hops
    wasted: int  # recovered hops
    rate: float  # wasted / hops
    traces: int  # traces with at least one wasted hop


class NoRetrieval(Out):
    answers: int  # judged answers
    no_retrieval: int  # answers with no retrieval before them in their turn
    rate: float  # no_retrieval / answers
    traces: int  # traces with at least one


class Distribution(Out):
    """A count per trace (hops or turns): its mean, maximum and how many traces have each."""

    traces: int
    mean: float
    max: int
    counts: dict[str, int]  # value -> traces, values in increasing order


class FirstFailingAccuracy(Out):
    """``firstFailingStep`` against ``expected.firstFailingStep`` (null: no step fails)."""

    labelled: int  # traces whose expected block gives firstFailingStep
    judged: int  # of those, traces with a verdict
    correct: int  # decided (not JUDGE_UNCERTAIN) with the labelled step, or none when none
    accuracy: float  # correct / judged
    overall_accuracy: float  # correct / labelled
    too_early: int  # a failure before the labelled step, or in a trace labelled as not failing
    too_late: int  # a failure after the labelled step, or none where one is labelled
    uncertain: int  # JUDGE_UNCERTAIN: no failing step decided


class StepLabels(Out):
    """Judged steps against their own labels (``steps[].expected``), per step kind."""

    classification: dict[str, Classification]
    components: dict[str, dict[str, Component]]


class TraceMetrics(Out):
    version: str
    traces: int
    judged: int  # traces with a verdict
    failures: int  # traces a step call failed on (no verdict)
    passed: int
    uncertain: int  # JUDGE_UNCERTAIN: routed to the fallback
    first_failing_step: FirstFailing
    by_hop_position: list[HopPosition]
    by_turn: list[TurnTally]
    wasted_hops: WastedHops
    no_retrieval: NoRetrieval
    hops_per_trace: Distribution
    turns_per_trace: Distribution
    first_failing_step_accuracy: FirstFailingAccuracy | None = None
    steps: StepLabels | None = None


def first_failing_step_match(judged: TraceJudged) -> bool | None:
    """Whether the trace's first failing step is the labelled one (``expected.
    firstFailingStep``, null: none fails); a JUDGE_UNCERTAIN trace decided none, so it never
    matches. None without that label or without a verdict (docs/semantics.md §8a)."""
    expected, verdict = judged.trace.expected, judged.verdict
    if verdict is None or expected is None or not expected.labels_first_failing_step:
        return None
    decided = verdict.diagnosis != "JUDGE_UNCERTAIN"
    return decided and verdict.first_failing_step == expected.first_failing_step


class _Tally:
    __slots__ = ("failed", "first", "judged", "passed", "recovered", "uncertain")

    def __init__(self) -> None:
        self.judged = self.passed = self.failed = self.uncertain = 0
        self.recovered = self.first = 0

    def add(self, s: StepVerdict, first: bool) -> None:
        d = s.verdict.diagnosis
        self.judged += 1
        self.passed += d == "PASS"
        self.uncertain += d == "JUDGE_UNCERTAIN"
        self.failed += d not in NOT_FAILED
        self.recovered += s.recovered
        self.first += first

    def out(self) -> StepTally:
        return StepTally(
            judged=self.judged,
            passed=self.passed,
            failed=self.failed,
            uncertain=self.uncertain,
            failure_rate=safe(self.failed, self.judged),
            first_failing=self.first,
        )

    def hop(self, position: int) -> HopPosition:
        return HopPosition(hop=position, **self.out().model_dump(), recovered=self.recovered)


class _Counts:
    """Values per trace: how many traces have each, and their exact sum."""

    __slots__ = ("by_value", "total")

    def __init__(self) -> None:
        self.by_value: Counter[int] = Counter()
        self.total = ExactSum()

    def add(self, value: int) -> None:
        self.by_value[value] += 1
        self.total.add(value)

    def out(self) -> Distribution:
        n = sum(self.by_value.values())
        return Distribution(
            traces=n,
            mean=safe(self.total.value(), n),
            max=max(self.by_value, default=0),
            counts={str(v): self.by_value[v] for v in sorted(self.by_value)},
        )


class _FirstFailingLabels:
    __slots__ = ("correct", "early", "judged", "labelled", "late", "uncertain")

    def __init__(self) -> None:
        self.labelled = self.judged = self.correct = 0
        self.early = self.late = self.uncertain = 0

    def add(self, judged: TraceJudged) -> None:
        expected = judged.trace.expected
        if expected is None or not expected.labels_first_failing_step:
            return
        self.labelled += 1
        verdict = judged.verdict
        if verdict is None:
            return
        self.judged += 1
        label, got = expected.first_failing_step, verdict.first_failing_step
        if verdict.diagnosis == "JUDGE_UNCERTAIN":
            self.uncertain += 1
        elif first_failing_step_match(judged):
            self.correct += 1
        elif label is None or (got is not None and got < label):
            self.early += 1
        else:
            self.late += 1

    def out(self) -> FirstFailingAccuracy | None:
        if not self.labelled:
            return None
        return FirstFailingAccuracy(
            labelled=self.labelled,
            judged=self.judged,
            correct=self.correct,
            accuracy=safe(self.correct, self.judged),
            overall_accuracy=safe(self.correct, self.labelled),
            too_early=self.early,
            too_late=self.late,
            uncertain=self.uncertain,
        )


class _StepLabelCounts:
    """Each labelled judged step's verdict against its label, and its judgments against its
    retrieval/generation labels (the components of docs/semantics.md §3)."""

    def __init__(self) -> None:
        self.labelled = False
        self.classes = {kind: ClassificationCounts() for kind in KINDS}
        self.components = {
            kind: {name: ComponentCounts() for name in names}
            for kind, names in STEP_JUDGMENTS.items()
        }

    def add(self, judged: TraceJudged, verdicts: Mapping[int, StepVerdict]) -> None:
        for index, step in enumerate(judged.trace.steps):
            if not isinstance(step, RetrievalStep | AnswerStep) or step.expected is None:
                continue
            self.labelled = True
            kind = "retrieval" if isinstance(step, RetrievalStep) else "answer"
            stepped = verdicts.get(index)
            if step.expected.diagnosis is not None:
                predicted = stepped.verdict.diagnosis if stepped is not None else None
                self.classes[kind].add(step.expected.diagnosis, predicted)
            j = judged.judgments.get(index)
            if j is not None:
                self._components(step, j)

    def _components(self, step: RetrievalStep | AnswerStep, j: StepJudgments) -> None:
        assert step.expected is not None
        r, g = step.expected.retrieval, step.expected.generation
        c = self.components
        if isinstance(step, RetrievalStep) and r is not None:
            hop = c["retrieval"]
            for cid, label in r.chunk_relevance.items():
                if (p := j.retrieval.chunk_relevance.get(cid)) is not None:
                    hop["chunkRelevance"].add(p, label)
            _join(hop["contextSufficiency"], j.retrieval.sufficiency, r.context_sufficiency)
            _join(hop["contextConflict"], j.retrieval.conflict, r.context_conflict)
        if isinstance(step, AnswerStep) and g is not None:
            answer, gj = c["answer"], j.generation
            _join(answer["answerRelevance"], gj.relevance, g.answer_relevance)
            _join(answer["groundedness"], gj.groundedness, g.groundedness)
            _join(answer["contradiction"], gj.contradiction, g.contradiction)
            _join(answer["correctness"], gj.correctness, g.correctness)

    def out(self) -> StepLabels | None:
        if not self.labelled:
            return None
        return StepLabels(
            classification={kind: counts.result() for kind, counts in self.classes.items()},
            components={
                kind: {name: counts.result() for name, counts in names.items()}
                for kind, names in self.components.items()
            },
        )


def _join(counts: ComponentCounts, p: float | None, label: bool | None) -> None:
    if p is not None and label is not None:
        counts.add(p, label)


def _positions(trace: Trace) -> dict[int, tuple[int, int]]:
    """Step index -> (turn index, position among its turn's hops; -1 for an answer)."""
    where: dict[int, tuple[int, int]] = {}
    for turn in turns_of(trace):
        where |= {hop: (turn.index, n) for n, hop in enumerate(turn.hops)}
        where |= {answer: (turn.index, -1) for answer in turn.answers}
    return where


class TraceMetricsAccumulator:
    """The ``traces`` section, fed one outcome at a time (rows are skipped)."""

    def __init__(self) -> None:
        self.traces = self.judged = self.failures = self.passed = self.uncertain = 0
        self.first_kind = {kind: Counter[str]() for kind in KINDS}
        self.first_no_retrieval = 0
        self.hops: dict[int, _Tally] = {}
        # per turn: [hops, answers]; a list, not a tuple, so that merged parts add up
        self.turns: dict[int, list[_Tally]] = {}
        self.turn_traces: Counter[int] = Counter()
        self.wasted_traces = self.no_retrieval_traces = self.no_retrieval_answers = 0
        self.hop_counts, self.turn_counts = _Counts(), _Counts()
        self.first_labels = _FirstFailingLabels()
        self.step_labels = _StepLabelCounts()

    def add(self, o: RowOutcome) -> None:
        judged = o.jev.trace
        if judged is None:
            return
        trace, verdict = judged.trace, judged.verdict
        self.traces += 1
        turns = len(turns_of(trace))
        self.hop_counts.add(sum(1 for s in trace.steps if s.kind == "retrieval"))
        self.turn_counts.add(turns)
        self.first_labels.add(judged)
        verdicts = {s.step: s for s in verdict.steps} if verdict is not None else {}
        self.step_labels.add(judged, verdicts)
        if verdict is None:
            self.failures += 1
            return
        self.judged += 1
        self.passed += verdict.diagnosis == "PASS"
        self.uncertain += verdict.diagnosis == "JUDGE_UNCERTAIN"
        first = verdict.first_failing_step
        self.turn_traces.update(range(turns))
        where = _positions(trace)
        for s in verdict.steps:
            turn, position = where[s.step]
            hops, answers = self.turns.setdefault(turn, [_Tally(), _Tally()])
            if position >= 0:
                self.hops.setdefault(position, _Tally()).add(s, s.step == first)
                hops.add(s, s.step == first)
            else:
                answers.add(s, s.step == first)
        self.wasted_traces += any(s.recovered for s in verdict.steps)
        unretrieved = sum(s.no_retrieval for s in verdict.steps)
        self.no_retrieval_answers += unretrieved
        self.no_retrieval_traces += unretrieved > 0
        if first is not None:
            kind = "retrieval" if isinstance(trace.steps[first], RetrievalStep) else "answer"
            self.first_kind[kind][verdict.diagnosis] += 1
            self.first_no_retrieval += any(
                s.step == first and s.no_retrieval for s in verdict.steps
            )

    def result(self) -> TraceMetrics | None:
        """The section; None when no trace was added (a run of rows alone)."""
        if not self.traces:
            return None
        hop_tallies = [self.hops[p] for p in sorted(self.hops)]
        answers = [self.turns[t][1] for t in self.turns]
        hops = sum(t.judged for t in hop_tallies)
        wasted = sum(t.recovered for t in hop_tallies)
        judged_answers = sum(t.judged for t in answers)
        no_retrieval = self.no_retrieval_answers
        failing = sum(sum(c.values()) for c in self.first_kind.values())
        return TraceMetrics(
            version=TRACE_METRICS_VERSION,
            traces=self.traces,
            judged=self.judged,
            failures=self.failures,
            passed=self.passed,
            uncertain=self.uncertain,
            first_failing_step=FirstFailing(
                traces=failing,
                rate=safe(failing, self.judged),
                by_kind={
                    kind: FirstFailingKind(
                        traces=sum(counts.values()),
                        by_diagnosis={d: counts[d] for d in DIAGNOSES if counts[d]},
                    )
                    for kind, counts in self.first_kind.items()
                },
                no_retrieval=self.first_no_retrieval,
            ),
            by_hop_position=[self.hops[p].hop(p) for p in sorted(self.hops)],
            by_turn=[
                TurnTally(
                    turn=t,
                    traces=self.turn_traces[t],
                    retrieval=self.turns[t][0].out(),
                    answer=self.turns[t][1].out(),
                )
                for t in sorted(self.turns)
            ],
            wasted_hops=WastedHops(
                hops=hops, wasted=wasted, rate=safe(wasted, hops), traces=self.wasted_traces
            ),
            no_retrieval=NoRetrieval(
                answers=judged_answers,
                no_retrieval=no_retrieval,
                rate=safe(no_retrieval, judged_answers),
                traces=self.no_retrieval_traces,
            ),
            hops_per_trace=self.hop_counts.out(),
            turns_per_trace=self.turn_counts.out(),
            first_failing_step_accuracy=self.first_labels.out(),
            steps=self.step_labels.out(),
        )
