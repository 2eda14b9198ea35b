"""The three modes' running counts: usage, classification, components, trade-off (pure).

Each ``*Counts`` class takes one row at a time and keeps counts, exact sums and compact
columns rather than outcomes; ``result()`` turns them into the report's models. The
``*_decided`` functions say what each mode decided on a row (Jev-only, baseline, cascade).
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Iterable

from ragbatch.core import (
    JUDGMENTS,
    ROUTINGS,
    Decided,
    PricedCall,
    PricingSnapshot,
    RowOutcome,
    Thresholds,
    total_cost,
)
from ragbatch.metrics import (
    CURVE,
    CURVE_NOTE,
    NOTE,
    SWEEP,
    CurvePoint,
    ModeSummary,
    RoutingCurve,
    RoutingCurves,
    Tradeoff,
    TradeoffPoint,
    point_of,
    rejudge,
)
from ragbatch.metrics import scores as m
from ragbatch.report._models import (
    Components,
    Failures,
    GenerationComponents,
    Leg,
    Mode,
    RetrievalComponents,
    Usage,
    UsageTotals,
)


class UsageCounts:
    """Calls and tokens per model, added one row's calls at a time."""

    __slots__ = ("estimated", "per_model")

    def __init__(self) -> None:
        self.per_model: dict[str, list[int]] = {}
        self.estimated = 0

    def add(self, calls: Iterable[PricedCall]) -> None:
        for call in calls:
            totals = self.per_model.setdefault(call.model, [0, 0, 0])
            totals[0] += 1
            totals[1] += call.input_tokens
            totals[2] += call.output_tokens
            self.estimated += call.estimated

    def tokens(self) -> list[tuple[str, int, int]]:
        """(model, input tokens, output tokens) per model: what :func:`total_cost` prices."""
        return [(model, i, o) for model, (_, i, o) in self.per_model.items()]

    def usage(self) -> Usage:
        by_model = {
            name: UsageTotals(calls=c, input_tokens=i, output_tokens=o)
            for name, (c, i, o) in sorted(self.per_model.items())
        }
        return Usage(
            calls=sum(u.calls for u in by_model.values()),
            input_tokens=sum(u.input_tokens for u in by_model.values()),
            output_tokens=sum(u.output_tokens for u in by_model.values()),
            by_model=by_model,
            estimated_calls=self.estimated,
        )

    def leg(self, pricing: PricingSnapshot) -> Leg:
        return Leg(usage=self.usage(), cost=total_cost(pricing, self.tokens()))


class ModeCounts:
    """One mode's metrics, fed one decided row at a time in input order.

    Per row it keeps only compact columns: the latency (8 bytes) and, for a labelled row with
    a verdict, its confidence and correctness (9 bytes); everything else is counts.
    """

    def __init__(self) -> None:
        self.rows = 0
        self.classification = m.ClassificationCounts()
        self.scored = m.ScoredColumns()
        self.latencies = array("d")
        self.usage = UsageCounts()
        self.failures: Counter[str] = Counter()

    def add(self, d: Decided) -> None:
        self.rows += 1
        if d.expected is not None:
            self.classification.add(d.expected, d.diagnosis)
            if d.diagnosis is not None and d.confidence is not None:
                self.scored.add(d.confidence, d.diagnosis == d.expected)
        if d.failure is not None:
            self.failures[d.failure.kind] += 1
        self.usage.add(d.calls)
        self.latencies.append(d.latency_ms)

    def result(self, pricing: PricingSnapshot) -> Mode:
        spent = self.usage.leg(pricing)
        failed = sum(self.failures.values())
        return Mode(
            rows=self.rows,
            classification=self.classification.result(),
            calibration=m.calibration(self.scored.pairs()),
            selective=m.selective(self.scored),
            latency=m.latency(self.latencies),
            usage=spent.usage,
            cost=spent.cost,
            failures=Failures(
                count=failed,
                rate=m.safe(failed, self.rows),
                by_kind=dict(sorted(self.failures.items())),
            ),
        )


def mode_metrics(decided: Iterable[Decided], pricing: PricingSnapshot) -> Mode:
    counts = ModeCounts()
    for d in decided:
        counts.add(d)
    return counts.result(pricing)


def jev_decided(o: RowOutcome) -> Decided:
    expected = o.row.expected.diagnosis if o.row.expected else None
    j = o.jev
    calls = tuple(
        PricedCall(r.model, r.usage.input_tokens, r.usage.output_tokens) for r in j.replies
    )
    if j.verdict is None:
        return Decided(expected, None, None, j.latency_ms, calls, j.failure)
    return Decided(expected, j.verdict.diagnosis, j.verdict.confidence, j.latency_ms, calls, None)


def baseline_decided(o: RowOutcome) -> Decided:
    expected = o.row.expected.diagnosis if o.row.expected else None
    b = o.baseline.reply
    if b is None:
        return Decided(expected, None, None, 0.0, (), o.baseline.failure)
    call = PricedCall(b.model, b.usage.input_tokens, b.usage.output_tokens, b.estimated)
    return Decided(expected, b.diagnosis, b.confidence, b.latency_ms, (call,), None)


def cascade_decided(jev: Decided, base: Decided, routed: bool) -> Decided:
    """Jev decides confident rows; uncertain ones go to the baseline (latency and cost add)."""
    if not routed:
        return jev
    return Decided(
        jev.expected,
        base.diagnosis,
        base.confidence,
        jev.latency_ms + base.latency_ms,
        jev.calls + base.calls,
        base.failure,
    )


class ComponentsCounts:
    """Each binary judgment against its labels, over the rows that have both."""

    def __init__(self) -> None:
        self.counts = {name: m.ComponentCounts() for name in JUDGMENTS}

    def add(self, o: RowOutcome) -> None:
        j, exp = o.jev.judgments, o.row.expected
        if j is None or exp is None:
            return
        c = self.counts
        r, g = exp.retrieval, exp.generation
        if r is not None:
            for cid, label in r.chunk_relevance.items():
                p = j.retrieval.chunk_relevance.get(cid)
                if p is not None:
                    c["chunkRelevance"].add(p, label)
            _join(c["contextSufficiency"], j.retrieval.sufficiency, r.context_sufficiency)
            _join(c["contextConflict"], j.retrieval.conflict, r.context_conflict)
        if g is not None:
            _join(c["answerRelevance"], j.generation.relevance, g.answer_relevance)
            _join(c["groundedness"], j.generation.groundedness, g.groundedness)
            _join(c["contradiction"], j.generation.contradiction, g.contradiction)
            _join(c["correctness"], j.generation.correctness, g.correctness)

    def result(self) -> Components:
        c = {name: counts.result() for name, counts in self.counts.items()}
        return Components(
            retrieval=RetrievalComponents(
                chunk_relevance=c["chunkRelevance"],
                context_sufficiency=c["contextSufficiency"],
                context_conflict=c["contextConflict"],
            ),
            generation=GenerationComponents(
                answer_relevance=c["answerRelevance"],
                groundedness=c["groundedness"],
                contradiction=c["contradiction"],
                correctness=c["correctness"],
            ),
        )


def _join(counts: m.ComponentCounts, p: float | None, label: bool | None) -> None:
    if p is not None and label is not None:
        counts.add(p, label)


class TradeoffCounts:
    """Every sweep point plus the run's own thresholds, re-diagnosed row by row.

    Per point and row it keeps one byte (routed to the fallback or not); classification and
    cost are counts, and latencies are rebuilt at the end from the modes' latency columns.
    """

    def __init__(self, run_thresholds: Thresholds) -> None:
        run = run_thresholds
        pairs = [
            (f, p, "sweep")
            for f, p in SWEEP
            if (f, p) != (run_thresholds.fail, run_thresholds.pass_)
        ]
        pairs.append((run_thresholds.fail, run_thresholds.pass_, "run"))
        self.points = [
            (
                f,
                p,
                label,
                run_thresholds if label == "run" else Thresholds(f, p, routing=run.routing),
            )
            for f, p, label in sorted(pairs)
        ]
        self.jev = [m.ClassificationCounts() for _ in self.points]
        self.cascade = [m.ClassificationCounts() for _ in self.points]
        self.fallback_usage = [UsageCounts() for _ in self.points]
        self.routed = [bytearray() for _ in self.points]
        self.auto = [0 for _ in self.points]

    def add(self, o: RowOutcome, jev: Decided, base: Decided) -> None:
        for i, (_, _, _, thresholds) in enumerate(self.points):
            v = rejudge(o.jev, thresholds)
            routed = v is not None and v.route == "fallback"
            self.auto[i] += v is not None and v.route == "auto"
            self.routed[i].append(routed)
            if routed:
                self.fallback_usage[i].add(base.calls)
            if jev.expected is not None:
                diagnosis = jev.diagnosis if v is None else v.diagnosis
                self.jev[i].add(jev.expected, diagnosis)
                self.cascade[i].add(jev.expected, base.diagnosis if routed else diagnosis)

    def result(self, pricing: PricingSnapshot, jev: ModeCounts, base: ModeCounts) -> Tradeoff:
        n = jev.rows
        base_point = point_of(base.result(pricing), 1.0 if n else 0.0)
        jev_cost = total_cost(pricing, jev.usage.tokens())
        jev_latency = m.latency(jev.latencies)
        points = []
        for i, (fail, pass_, label, _) in enumerate(self.points):
            coverage = m.safe(self.auto[i], n)
            cascade = ModeSummary(
                classification=self.cascade[i].result(),
                cost=total_cost(pricing, jev.usage.tokens() + self.fallback_usage[i].tokens()),
                latency=m.latency(
                    j + b if r else j
                    for j, b, r in zip(jev.latencies, base.latencies, self.routed[i], strict=True)
                ),
            )
            points.append(
                TradeoffPoint(
                    fail_threshold=fail,
                    pass_threshold=pass_,
                    policy=label,
                    jev_only=point_of(
                        ModeSummary(self.jev[i].result(), jev_cost, jev_latency), coverage
                    ),
                    baseline=base_point,
                    cascade=point_of(cascade, coverage),
                )
            )
        return Tradeoff(note=NOTE, points=points)


class CurveCounts:
    """The risk-coverage curve of every routing (:data:`CURVE` thresholds), row by row."""

    def __init__(self) -> None:
        self.points = [
            (routing, t, Thresholds(t, 1.0 - t, routing=routing))
            for routing in ROUTINGS
            for t in CURVE
        ]
        self.auto = [0] * len(self.points)
        self.labelled = [0] * len(self.points)
        self.errors = [0] * len(self.points)
        self.rows = 0

    def add(self, o: RowOutcome, expected: str | None) -> None:
        if o.jev.judgments is None and (o.jev.trace is None or o.jev.trace.verdict is None):
            return
        self.rows += 1
        for i, (_, _, thresholds) in enumerate(self.points):
            v = rejudge(o.jev, thresholds)
            if v is None or v.route != "auto":
                continue
            self.auto[i] += 1
            if expected is not None:
                self.labelled[i] += 1
                self.errors[i] += v.diagnosis != expected

    def result(self) -> RoutingCurves:
        curves: dict[str, list[CurvePoint]] = {routing: [] for routing in ROUTINGS}
        for i, (routing, t, _) in enumerate(self.points):
            curves[routing].append(
                CurvePoint(
                    fail_threshold=t,
                    pass_threshold=round(1.0 - t, 12),
                    coverage=m.safe(self.auto[i], self.rows),
                    risk=self.errors[i] / self.labelled[i] if self.labelled[i] else None,
                    auto_rows=self.auto[i],
                    labelled_auto_rows=self.labelled[i],
                    errors=self.errors[i],
                )
            )
        return RoutingCurves(
            note=CURVE_NOTE,
            curves=[RoutingCurve(routing=r, points=points) for r, points in curves.items()],
        )
