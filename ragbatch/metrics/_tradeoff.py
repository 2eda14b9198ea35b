"""The cascade trade-off: how much traffic Jev decides, at what quality, cost and latency (pure).

For a sweep of two-sided thresholds (and the run's own policy) every successful row is
re-diagnosed from its recorded probabilities, with no new calls, and the three modes are
compared on identical rows: automatic coverage, end-to-end accuracy and per-label F1, cost and
p50/p95 latency after fallback. This answers the question of docs/semantics.md §4: how much judge traffic can Jev
resolve at an acceptable risk, and what does the fallback still cost?
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from ragbatch.core import (
    Cost,
    JevOutcome,
    Thresholds,
    Verdict,
    claim_result,
    diagnose,
    diagnose_trace,
    summarize_claims,
)
from ragbatch.metrics._scores import Classification, Latency, Out

SWEEP: tuple[tuple[float, float], ...] = (
    (0.05, 0.95),
    (0.1, 0.9),
    (0.2, 0.8),
    (0.3, 0.7),
    (0.4, 0.6),
)


class ModePoint(Out):
    coverage: float  # rows decided automatically (no fallback, no failure) / all rows
    accuracy: float
    macro_f1: float
    per_label_f1: dict[str, float]
    cost_usd: float | None
    latency_p50_ms: float | None
    latency_p95_ms: float | None


class TradeoffPoint(Out):
    fail_threshold: float
    pass_threshold: float
    policy: str  # "sweep" or "run" (the thresholds this report was made with)
    jev_only: ModePoint
    baseline: ModePoint
    cascade: ModePoint


class Tradeoff(Out):
    note: str
    points: list[TradeoffPoint]


def rejudge(jev: JevOutcome, thresholds: Thresholds) -> Verdict | None:
    """The row's verdict under other thresholds, from its recorded probabilities (a trace's
    from its steps', docs/semantics.md §8)."""
    if jev.trace is not None:
        judged = jev.trace
        return (
            diagnose_trace(judged.trace, judged.judgments, thresholds).verdict
            if judged.verdict
            else None
        )
    if jev.judgments is None:
        return None
    summary = None
    if jev.claims is not None:
        results = [
            claim_result(r.claim, r.evidence, r.probabilities, thresholds.pass_) for r in jev.claims
        ]
        summary = summarize_claims(results)
    return diagnose(jev.judgments, thresholds, summary)


class ModeFigures(Protocol):
    """What a trade-off point reads of a mode: the report's ``Mode`` has these too."""

    @property
    def classification(self) -> Classification: ...
    @property
    def cost(self) -> Cost: ...
    @property
    def latency(self) -> Latency: ...


@dataclass(frozen=True, slots=True)
class ModeSummary:
    classification: Classification
    cost: Cost
    latency: Latency


def point_of(mode: ModeFigures, coverage: float) -> ModePoint:
    """The trade-off figures of one mode's metrics."""
    c = mode.classification
    return ModePoint(
        coverage=coverage,
        accuracy=c.accuracy,
        macro_f1=c.macro_f1,
        per_label_f1={label: s.f1 for label, s in c.per_label.items()},
        cost_usd=mode.cost.usd,
        latency_p50_ms=mode.latency.p50_ms,
        latency_p95_ms=mode.latency.p95_ms,
    )


class CurvePoint(Out):
    fail_threshold: float
    pass_threshold: float
    coverage: float  # rows decided automatically / all rows with answers
    risk: float | None  # wrong automatic diagnoses / labelled automatic rows (None: none)
    auto_rows: int
    labelled_auto_rows: int
    errors: int


class RoutingCurve(Out):
    routing: str
    points: list[CurvePoint]


class RoutingCurves(Out):
    note: str
    curves: list[RoutingCurve]


# Symmetric (t, 1 - t) thresholds of the risk-coverage curves, most conservative first.
CURVE: tuple[float, ...] = (0.01, 0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4)
CURVE_NOTE = (
    "Risk-coverage of both routings on these rows, re-diagnosed from recorded probabilities "
    "at symmetric thresholds (t, 1 - t): coverage = rows decided automatically / rows with "
    "answers, risk = wrong automatic diagnoses / labelled automatic rows. Showcase decides a "
    "later rule while an earlier one is still uncertain, so its risk does not fall with t; "
    "guarded's does (docs/semantics.md §2a)."
)


NOTE = (
    "Re-diagnosed from recorded probabilities (no new calls); coverage = rows Jev decides "
    "automatically / all rows; the baseline answers every row; the cascade sends the uncertain "
    "band to the baseline. Per-judgment overrides of a calibrated policy apply only to the "
    "point marked 'run'."
)
