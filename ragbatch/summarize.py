"""Row outcomes -> the three modes, their metrics and the report (pure: no I/O).

Jev-only, baseline-only and the Jev -> baseline cascade are computed on the same rows. A
failed Jev call is a failure in Jev-only and in the cascade (never routed ``auto``, never sent
to the fallback as if it were uncertain); a row without a usable baseline verdict is a failure
of the baseline mode, and of the cascade only when the cascade needed it.

:class:`ReportBuilder` takes outcomes one at a time, in input order, and keeps counts, exact
sums and compact columns rather than the outcomes, so a run of millions of rows summarizes in
bounded memory; :func:`summarize` is the same over a finished sequence.
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from ragbatch import metrics as m
from ragbatch.budget import BUDGET_KIND
from ragbatch.claim_metrics import ClaimMetricsAccumulator, ClaimRowInput
from ragbatch.golden_eval import GoldenAccumulator, row_check, row_ranking
from ragbatch.outcome import Decided, PricedCall, RowOutcome
from ragbatch.policy import JUDGMENTS, Thresholds
from ragbatch.pricing import PricingSnapshot, total_cost
from ragbatch.questions import DECISION_IDS, DECISION_VERSION, report_variant
from ragbatch.ranking import DEFAULT_KS
from ragbatch.report import (
    CascadeMode,
    Components,
    DatasetInfo,
    DecisionsInfo,
    EndToEnd,
    Failures,
    GenerationComponents,
    Incomplete,
    JevOnlyMode,
    Leg,
    Mode,
    Modes,
    PolicyInfo,
    PricingInfo,
    ProviderInfo,
    Report,
    RetrievalComponents,
    RowResult,
    RowsOmitted,
    Usage,
    UsageTotals,
)
from ragbatch.row_results import row_result
from ragbatch.tradeoff import (
    NOTE,
    SWEEP,
    ModeSummary,
    Tradeoff,
    TradeoffPoint,
    point_of,
    rejudge,
)

PRECEDENCE = [
    "CONFLICTING_EVIDENCE",
    "RETRIEVAL_MISS",
    "RETRIEVAL_INSUFFICIENT",
    "ANSWER_IRRELEVANT",
    "GENERATOR_UNGROUNDED",
    "ANSWER_INCORRECT",
    "JUDGE_UNCERTAIN",
    "PASS",
]


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


@dataclass(frozen=True, slots=True)
class RunInfo:
    """What the report says about the run besides the rows."""

    dataset_name: str
    dataset_sha256: str
    provider: str
    requested_model: str
    baseline: str
    thresholds: Thresholds
    pricing: PricingSnapshot
    claims: tuple[str, str] | None = None  # (extractor, scope) in claim mode
    ks: tuple[int, ...] = DEFAULT_KS
    slice_by: tuple[str, ...] = ()
    policy_version: str | None = None
    max_report_rows: int | None = None  # above this, rows[] is left out (aggregates only)


class TradeoffCounts:
    """Every sweep point plus the run's own thresholds, re-diagnosed row by row.

    Per point and row it keeps one byte (routed to the fallback or not); classification and
    cost are counts, and latencies are rebuilt at the end from the modes' latency columns.
    """

    def __init__(self, run_thresholds: Thresholds) -> None:
        pairs = [
            (f, p, "sweep")
            for f, p in SWEEP
            if (f, p) != (run_thresholds.fail, run_thresholds.pass_)
        ]
        pairs.append((run_thresholds.fail, run_thresholds.pass_, "run"))
        self.points = [
            (f, p, label, run_thresholds if label == "run" else Thresholds(f, p))
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


INCOMPLETE_IDS = 20


class ReportBuilder:
    """The report, built from outcomes added one at a time in input order.

    Memory per row is a few compact columns (latencies, confidences, routing bytes); the
    per-row table is kept only while the run has at most ``max_report_rows`` rows, so a run
    of millions of rows summarizes in bounded memory. :func:`summarize` is the same over a
    finished sequence.
    """

    def __init__(self, info: RunInfo, expected_rows: int | None = None) -> None:
        """``expected_rows``: the row count when known up front (a JSONL file's lines); past
        the limit the per-row table is then never started."""
        self.info = info
        self.rows = 0
        self.labelled = 0
        self.jev, self.base, self.cascade = ModeCounts(), ModeCounts(), ModeCounts()
        self.fallback = UsageCounts()  # the cascade's baseline leg: routed rows only
        self.routes: Counter[str] = Counter()
        self.variants: Counter[str] = Counter()
        self.answered_by: set[str] = set()
        self.skipped = 0
        self.skipped_ids: list[str] = []
        self.components = ComponentsCounts()
        self.golden = GoldenAccumulator(info.ks, info.slice_by)
        self.claims = ClaimMetricsAccumulator(*info.claims) if info.claims else None
        self.tradeoff = TradeoffCounts(info.thresholds)
        limit = info.max_report_rows
        over = limit is not None and expected_rows is not None and expected_rows > limit
        self.table: list[RowResult] | None = None if over else []

    def add(self, o: RowOutcome, want_row: bool = False) -> RowResult | None:
        """Fold one outcome in. Returns its ``rows[]`` entry when the table keeps it or
        ``want_row`` asks for it (``--rows-out``), so a row's result is built once."""
        info = self.info
        self.rows += 1
        jev, base = jev_decided(o), baseline_decided(o)
        verdict = o.jev.verdict
        routed = verdict is not None and verdict.route == "fallback"
        cascade = cascade_decided(jev, base, routed)
        self.jev.add(jev)
        self.base.add(base)
        self.cascade.add(cascade)
        if routed:
            self.fallback.add(base.calls)
        self.routes[verdict.route if verdict else "failed"] += 1
        self.variants[o.decision.variant] += 1
        self.labelled += bool(o.row.expected and o.row.expected.diagnosis)
        if o.jev.reply is not None:
            self.answered_by.add(o.jev.reply.model)
        if o.jev.failure is not None and o.jev.failure.kind == BUDGET_KIND:
            self.skipped += 1
            if len(self.skipped_ids) < INCOMPLETE_IDS:
                self.skipped_ids.append(o.row.id)
        self.components.add(o)
        ranking, check = row_ranking(o, info.ks), row_check(o)
        self.golden.add(o, ranking, check)
        if self.claims is not None and o.jev.claims:
            self.claims.add(ClaimRowInput(o.row, o.jev.claims))
        self.tradeoff.add(o, jev, base)
        if info.max_report_rows is not None and self.rows > info.max_report_rows:
            self.table = None
        if self.table is None and not want_row:
            return None
        result = row_result(o, base, cascade, routed, ranking, check)
        if self.table is not None:
            self.table.append(result)
        return result

    def report(self, dataset_sha256: str | None = None) -> Report:
        """The whole report; ``dataset_sha256`` when it was known only after reading."""
        info = self.info
        n = self.rows
        jev_mode = self.jev.result(info.pricing)
        cascade_mode = self.cascade.result(info.pricing)
        golden = self.golden.result()
        cls = cascade_mode.classification
        routes, fallback = self.routes, self.fallback
        return Report(
            report_version="1",
            incomplete=(
                Incomplete(
                    reason="the --max-cost budget was reached; rows left were not evaluated",
                    rows_not_evaluated=self.skipped,
                    first_ids=self.skipped_ids,
                )
                if self.skipped
                else None
            ),
            dataset=DatasetInfo(
                name=info.dataset_name,
                rows=n,
                labelled_rows=self.labelled,
                sha256=info.dataset_sha256 if dataset_sha256 is None else dataset_sha256,
            ),
            decisions=DecisionsInfo(
                variant=report_variant(set(self.variants)),
                version=DECISION_VERSION,
                ids=DECISION_IDS,
                rows_by_variant=dict(sorted(self.variants.items())),
            ),
            policy=PolicyInfo(
                name="calibrated" if info.policy_version else "default",
                version=info.policy_version,
                per_judgment={n: (f, p) for n, f, p in info.thresholds.per} or None,
                fail_threshold=info.thresholds.fail,
                pass_threshold=info.thresholds.pass_,
                precedence=PRECEDENCE,
            ),
            provider=ProviderInfo(
                name=info.provider,
                requested_model=info.requested_model,
                answered_by=sorted(self.answered_by),
                baseline=info.baseline,
            ),
            pricing=PricingInfo(
                version=info.pricing.version,
                effective_date=info.pricing.effective_date,
                currency=info.pricing.currency,
                sha256=info.pricing.sha256,
            ),
            modes=Modes(
                jev_only=JevOnlyMode(
                    **dict(jev_mode),
                    routes={k: routes.get(k, 0) for k in ("auto", "fallback", "failed")},
                    components=self.components.result(),
                    claims=self.claims.result() if self.claims is not None else None,
                    abstention=golden.abstention,
                ),
                baseline=self.base.result(info.pricing),
                cascade=CascadeMode(
                    **dict(cascade_mode),
                    fallback_rate=m.safe(routes.get("fallback", 0), n),
                    primary_resolved_rate=m.safe(routes.get("auto", 0), n),
                    primary_failure_rate=m.safe(routes.get("failed", 0), n),
                    legs={
                        "jev": self.jev.usage.leg(info.pricing),
                        "baseline": fallback.leg(info.pricing),
                    },
                    end_to_end=EndToEnd(
                        accuracy=cls.accuracy,
                        overall_accuracy=cls.overall_accuracy,
                        macro_f1=cls.macro_f1,
                        failure_rate=cascade_mode.failures.rate,
                        latency_p50_ms=cascade_mode.latency.p50_ms,
                        latency_p95_ms=cascade_mode.latency.p95_ms,
                        cost_usd=cascade_mode.cost.usd,
                        baseline_calls=sum(c for c, _, _ in fallback.per_model.values()),
                    ),
                ),
            ),
            tradeoff=self.tradeoff.result(info.pricing, self.jev, self.base),
            **{k: v for k, v in dict(golden).items() if k != "abstention"},
            rows_omitted=(
                RowsOmitted(
                    rows=n,
                    limit=info.max_report_rows,
                    reason="more rows than --max-report-rows: per-row results are in --rows-out",
                )
                if self.table is None
                else None
            ),
            rows=self.table or [],
        )


def summarize(outcomes: Iterable[RowOutcome], info: RunInfo) -> Report:
    """The whole report, from outcomes in input order."""
    builder = ReportBuilder(info)
    for o in outcomes:
        builder.add(o)
    return builder.report()
