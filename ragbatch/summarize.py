"""Row outcomes -> the three modes, their metrics and the report (pure: no I/O).

Jev-only, baseline-only and the Jev -> baseline cascade are computed on the same rows. A
failed Jev call is a failure in Jev-only and in the cascade (never routed ``auto``, never sent
to the fallback as if it were uncertain); a row without a usable baseline verdict is a failure
of the baseline mode, and of the cascade only when the cascade needed it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ragbatch import metrics as m
from ragbatch.budget import BUDGET_KIND
from ragbatch.claim_metrics import ClaimRowInput, claim_metrics
from ragbatch.golden_eval import golden_sections, row_check, row_ranking
from ragbatch.outcome import Decided, PricedCall, RowOutcome
from ragbatch.policy import Thresholds
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


def usage_of(calls: Iterable[PricedCall]) -> Usage:
    per_model: dict[str, list[int]] = {}
    estimated = 0
    for call in calls:
        totals = per_model.setdefault(call.model, [0, 0, 0])
        totals[0] += 1
        totals[1] += call.input_tokens
        totals[2] += call.output_tokens
        estimated += call.estimated
    by_model = {
        name: UsageTotals(calls=c, input_tokens=i, output_tokens=o)
        for name, (c, i, o) in sorted(per_model.items())
    }
    return Usage(
        calls=sum(u.calls for u in by_model.values()),
        input_tokens=sum(u.input_tokens for u in by_model.values()),
        output_tokens=sum(u.output_tokens for u in by_model.values()),
        by_model=by_model,
        estimated_calls=estimated,
    )


def leg(calls: Sequence[PricedCall], pricing: PricingSnapshot) -> Leg:
    usage = usage_of(calls)
    cost = total_cost(pricing, ((c.model, c.input_tokens, c.output_tokens) for c in calls))
    return Leg(usage=usage, cost=cost)


def mode_metrics(decided: Sequence[Decided], pricing: PricingSnapshot) -> Mode:
    labelled = [d for d in decided if d.expected is not None]
    pairs = [(d.expected, d.diagnosis) for d in labelled if d.expected is not None]
    scored = [
        (d.confidence, d.diagnosis == d.expected)
        for d in labelled
        if d.diagnosis is not None and d.confidence is not None
    ]
    failures = [d.failure for d in decided if d.failure is not None]
    calls = [c for d in decided for c in d.calls]
    spent = leg(calls, pricing)
    return Mode(
        rows=len(decided),
        classification=m.classification(pairs),
        calibration=m.calibration(scored),
        selective=m.selective(scored),
        latency=m.latency(d.latency_ms for d in decided),
        usage=spent.usage,
        cost=spent.cost,
        failures=Failures(
            count=len(failures),
            rate=m.safe(len(failures), len(decided)),
            by_kind=dict(sorted(Counter(f.kind for f in failures).items())),
        ),
    )


def mode_summary(decided: Sequence[Decided], pricing: PricingSnapshot) -> ModeSummary:
    """Classification, cost and latency only: what the trade-off sweep needs, cheaply."""
    pairs = [(d.expected, d.diagnosis) for d in decided if d.expected is not None]
    calls = [c for d in decided for c in d.calls]
    return ModeSummary(
        classification=m.classification(pairs),
        cost=total_cost(pricing, ((c.model, c.input_tokens, c.output_tokens) for c in calls)),
        latency=m.latency(d.latency_ms for d in decided),
    )


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


def components(outcomes: Sequence[RowOutcome]) -> Components:
    pairs: dict[str, list[tuple[float, bool]]] = {
        k: []
        for k in [
            "chunkRelevance",
            "contextSufficiency",
            "contextConflict",
            "answerRelevance",
            "groundedness",
            "contradiction",
            "correctness",
        ]
    }
    for o in outcomes:
        j, exp = o.jev.judgments, o.row.expected
        if j is None or exp is None:
            continue
        r, g = exp.retrieval, exp.generation
        if r is not None:
            for cid, label in r.chunk_relevance.items():
                p = j.retrieval.chunk_relevance.get(cid)
                if p is not None:
                    pairs["chunkRelevance"].append((p, label))
            _join(pairs["contextSufficiency"], j.retrieval.sufficiency, r.context_sufficiency)
            _join(pairs["contextConflict"], j.retrieval.conflict, r.context_conflict)
        if g is not None:
            _join(pairs["answerRelevance"], j.generation.relevance, g.answer_relevance)
            _join(pairs["groundedness"], j.generation.groundedness, g.groundedness)
            _join(pairs["contradiction"], j.generation.contradiction, g.contradiction)
            _join(pairs["correctness"], j.generation.correctness, g.correctness)
    c = {k: m.component(v) for k, v in pairs.items()}
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


def _join(out: list[tuple[float, bool]], p: float | None, label: bool | None) -> None:
    if p is not None and label is not None:
        out.append((p, label))


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


def build_tradeoff(
    outcomes: Sequence[RowOutcome],
    run_thresholds: Thresholds,
    pricing: PricingSnapshot,
    jev: Sequence[Decided],
    base: Sequence[Decided],
) -> Tradeoff:
    """Every sweep point plus the run's own thresholds, on the same rows."""
    n = len(outcomes)
    base_mode = point_of(mode_summary(base, pricing), 1.0 if n else 0.0)
    pairs = [
        (f, p, "sweep") for f, p in SWEEP if (f, p) != (run_thresholds.fail, run_thresholds.pass_)
    ]
    pairs.append((run_thresholds.fail, run_thresholds.pass_, "run"))
    points = []
    for fail, pass_, label in sorted(pairs):
        thresholds = run_thresholds if label == "run" else Thresholds(fail, pass_)
        verdicts = [rejudge(o.jev, thresholds) for o in outcomes]
        jev_rows = [
            d
            if v is None
            else Decided(d.expected, v.diagnosis, v.confidence, d.latency_ms, d.calls, None)
            for d, v in zip(jev, verdicts, strict=True)
        ]
        routed = [v is not None and v.route == "fallback" for v in verdicts]
        cascade = [cascade_decided(j, b, r) for j, b, r in zip(jev_rows, base, routed, strict=True)]
        coverage = m.safe(sum(v is not None and v.route == "auto" for v in verdicts), n)
        points.append(
            TradeoffPoint(
                fail_threshold=fail,
                pass_threshold=pass_,
                policy=label,
                jev_only=point_of(mode_summary(jev_rows, pricing), coverage),
                baseline=base_mode,
                cascade=point_of(mode_summary(cascade, pricing), coverage),
            )
        )
    return Tradeoff(note=NOTE, points=points)


def summarize(outcomes: Sequence[RowOutcome], info: RunInfo) -> Report:
    """The whole report, from outcomes in input order."""
    jev = [jev_decided(o) for o in outcomes]
    base = [baseline_decided(o) for o in outcomes]
    routed = [o.jev.verdict is not None and o.jev.verdict.route == "fallback" for o in outcomes]
    cascade = [cascade_decided(j, b, r) for j, b, r in zip(jev, base, routed, strict=True)]
    n = len(outcomes)
    routes = Counter(o.jev.verdict.route if o.jev.verdict else "failed" for o in outcomes)

    jev_mode = mode_metrics(jev, info.pricing)
    golden = golden_sections(outcomes, info.ks, info.slice_by)
    cascade_mode = mode_metrics(cascade, info.pricing)
    jev_calls = [c for d in jev for c in d.calls]
    base_calls = [c for d, r in zip(base, routed, strict=True) if r for c in d.calls]
    cls = cascade_mode.classification
    variants = Counter(o.decision.variant for o in outcomes)
    skipped = [o.row.id for o in outcomes if o.jev.failure and o.jev.failure.kind == BUDGET_KIND]
    omit_rows = info.max_report_rows is not None and n > info.max_report_rows
    return Report(
        report_version="1",
        incomplete=(
            Incomplete(
                reason="the --max-cost budget was reached; rows left were not evaluated",
                rows_not_evaluated=len(skipped),
                first_ids=skipped[:20],
            )
            if skipped
            else None
        ),
        dataset=DatasetInfo(
            name=info.dataset_name,
            rows=n,
            labelled_rows=sum(1 for o in outcomes if o.row.expected and o.row.expected.diagnosis),
            sha256=info.dataset_sha256,
        ),
        decisions=DecisionsInfo(
            variant=report_variant(set(variants)),
            version=DECISION_VERSION,
            ids=DECISION_IDS,
            rows_by_variant=dict(sorted(variants.items())),
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
            answered_by=sorted({o.jev.reply.model for o in outcomes if o.jev.reply}),
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
                components=components(outcomes),
                claims=(
                    claim_metrics(
                        [ClaimRowInput(o.row, o.jev.claims) for o in outcomes if o.jev.claims],
                        *info.claims,
                    )
                    if info.claims
                    else None
                ),
                abstention=golden.abstention,
            ),
            baseline=mode_metrics(base, info.pricing),
            cascade=CascadeMode(
                **dict(cascade_mode),
                fallback_rate=m.safe(sum(routed), n),
                primary_resolved_rate=m.safe(routes.get("auto", 0), n),
                primary_failure_rate=m.safe(routes.get("failed", 0), n),
                legs={
                    "jev": leg(jev_calls, info.pricing),
                    "baseline": leg(base_calls, info.pricing),
                },
                end_to_end=EndToEnd(
                    accuracy=cls.accuracy,
                    overall_accuracy=cls.overall_accuracy,
                    macro_f1=cls.macro_f1,
                    failure_rate=cascade_mode.failures.rate,
                    latency_p50_ms=cascade_mode.latency.p50_ms,
                    latency_p95_ms=cascade_mode.latency.p95_ms,
                    cost_usd=cascade_mode.cost.usd,
                    baseline_calls=len(base_calls),
                ),
            ),
        ),
        tradeoff=build_tradeoff(outcomes, info.thresholds, info.pricing, jev, base),
        **{k: v for k, v in dict(golden).items() if k != "abstention"},
        rows_omitted=(
            RowsOmitted(
                rows=n,
                limit=info.max_report_rows,
                reason="more rows than --max-report-rows: per-row results are in --rows-out",
            )
            if omit_rows
            else None
        ),
        rows=[]
        if omit_rows
        else [
            row_result(o, b, c, r, row_ranking(o, info.ks), row_check(o))
            for o, b, c, r in zip(outcomes, base, cascade, routed, strict=True)
        ],
    )
