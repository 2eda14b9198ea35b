"""Row outcomes -> the three modes, their metrics and the report (pure: no I/O).

Jev-only, baseline-only and the Jev -> baseline cascade (docs/semantics.md §4) are computed
on the same rows. A failed Jev call is a failure in Jev-only and in the cascade (never routed
``auto``, never sent to the fallback as if it were uncertain); a row without a usable baseline
verdict is a failure of the baseline mode, and of the cascade only when the cascade needed it.

:class:`ReportBuilder` takes outcomes one at a time, in input order, and keeps counts, exact
sums and compact columns rather than the outcomes, so a run of millions of rows summarizes in
bounded memory; :func:`summarize` is the same over a finished sequence.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from ragbatch.core import (
    ANSWER_DECISION_IDS,
    BUDGET_KIND,
    DECISION_IDS,
    DECISION_VERSION,
    HOP_DECISION_ID,
    TRACE_DECISION_IDS,
    TRACE_DECISION_VERSION,
    Guarantee,
    PricingSnapshot,
    RowOutcome,
    Thresholds,
    report_variant,
)
from ragbatch.metrics import (
    DEFAULT_KS,
    ClaimMetricsAccumulator,
    ClaimRowInput,
    GoldenAccumulator,
    JudgeAudit,
    TraceMetricsAccumulator,
    row_check,
    row_ranking,
)
from ragbatch.metrics import scores as m
from ragbatch.report._models import (
    CascadeMode,
    DatasetInfo,
    DecisionsInfo,
    EndToEnd,
    Incomplete,
    JevOnlyMode,
    Modes,
    PolicyInfo,
    PricingInfo,
    ProviderInfo,
    Report,
    RowResult,
    RowsOmitted,
    TracesInfo,
)
from ragbatch.report._modes import (
    ComponentsCounts,
    CurveCounts,
    ModeCounts,
    TradeoffCounts,
    UsageCounts,
    baseline_decided,
    cascade_decided,
    jev_decided,
)
from ragbatch.report._rows import row_result

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
    guarantee: Guarantee | None = None  # the calibrated policy's, when it has one
    max_report_rows: int | None = None  # above this, rows[] is left out (aggregates only)
    rows_out: bool = False  # per-row results also stream to a --rows-out file


ROWS_IN_FILE = "more rows than --max-report-rows: per-row results are in --rows-out"
ROWS_NOT_KEPT = (
    "more rows than --max-report-rows and no --rows-out: per-row results were not kept; rerun "
    "with --rows-out PATH (cached rows are free) to keep them"
)


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
        self.traces = 0
        self.trace_metrics = TraceMetricsAccumulator()
        self.answered_by: set[str] = set()
        self.skipped = 0
        self.skipped_ids: list[str] = []
        self.components = ComponentsCounts()
        self.golden = GoldenAccumulator(info.ks, info.slice_by)
        self.claims = ClaimMetricsAccumulator(*info.claims) if info.claims else None
        self.tradeoff = TradeoffCounts(info.thresholds)
        # Both routings' risk-coverage curves, side by side, once routing is a choice made.
        wants_curves = info.policy_version is not None or info.thresholds.routing != "showcase"
        self.curves = CurveCounts() if wants_curves else None
        limit = info.max_report_rows
        over = limit is not None and expected_rows is not None and expected_rows > limit
        self.table: list[RowResult] | None = None if over else []
        self.judge_audit: JudgeAudit | None = None  # the probe pass's (--probe), at the end

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
        self.traces += o.jev.trace is not None
        self.trace_metrics.add(o)
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
        if self.curves is not None:
            self.curves.add(o, jev.expected)
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
                traces=traces_info(self.traces),
            ),
            policy=PolicyInfo(
                name="calibrated" if info.policy_version else "default",
                version=info.policy_version,
                per_judgment={n: (f, p) for n, f, p in info.thresholds.per} or None,
                fail_threshold=info.thresholds.fail,
                pass_threshold=info.thresholds.pass_,
                routing=None if info.thresholds.routing == "showcase" else info.thresholds.routing,
                precedence=PRECEDENCE,
                guarantee=info.guarantee,
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
            routing_curves=(
                self.curves.result() if self.curves is not None and self.labelled else None
            ),
            traces=self.trace_metrics.result(),
            **{k: v for k, v in dict(golden).items() if k != "abstention"},
            judge_audit=self.judge_audit,
            rows_omitted=(
                RowsOmitted(
                    rows=n,
                    limit=info.max_report_rows,
                    reason=ROWS_IN_FILE if info.rows_out else ROWS_NOT_KEPT,
                )
                if self.table is None
                else None
            ),
            rows=self.table or [],
        )


def traces_info(count: int) -> TracesInfo | None:
    """The decisions of a run's traces; None for a run of rows alone."""
    if count == 0:
        return None
    ids = {f"trace.{v}": i for v, i in TRACE_DECISION_IDS.items()}
    ids |= {"hop": HOP_DECISION_ID} | {f"answer.{v}": i for v, i in ANSWER_DECISION_IDS.items()}
    return TracesInfo(count=count, version=TRACE_DECISION_VERSION, ids=ids)


def summarize(outcomes: Iterable[RowOutcome], info: RunInfo) -> Report:
    """The whole report, from outcomes in input order."""
    builder = ReportBuilder(info)
    for o in outcomes:
        builder.add(o)
    return builder.report()
