"""Every metric of the report, computed exactly from compact per-row numbers (pure: no I/O).

Formulas follow rag-semantics §4. ``safe(a, b)`` is a / b, or 0 when b is 0. Sums use
``math.fsum`` (correctly rounded), so a metric does not depend on row order except where the
definition itself does (the risk-coverage curve breaks confidence ties by row order).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

BUCKETS = 10
DEFAULT_SWEEP = (0.5, 0.8, 0.9)


class Out(BaseModel):
    """Base of report sections: frozen, camelCase on output, field order = key order."""

    model_config = ConfigDict(frozen=True, alias_generator=to_camel, populate_by_name=True)


def safe(a: float, b: float) -> float:
    return a / b if b else 0.0


# -- classification -----------------------------------------------------------------------


class LabelScores(Out):
    precision: float
    recall: float
    f1: float
    support: int


class Confusion(Out):
    labels: list[str]
    matrix: list[list[int]]  # rows: actual label, columns: predicted label


class Classification(Out):
    rows: int
    successful: int
    correct: int
    accuracy: float
    overall_accuracy: float
    success_rate: float
    failures: int
    failure_rate: float
    macro_f1: float
    per_label: dict[str, LabelScores]
    confusion: Confusion


def classification(pairs: Sequence[tuple[str, str | None]]) -> Classification:
    """``pairs`` = (actual, predicted or None for a failed row), one per labelled row."""
    labels: list[str] = []
    seen: set[str] = set()
    for actual, predicted in pairs:
        if predicted is None:
            continue  # failed rows carry no prediction and add no label
        for label in (actual, predicted):
            if label not in seen:
                seen.add(label)
                labels.append(label)
    index = {label: i for i, label in enumerate(labels)}
    matrix = [[0] * len(labels) for _ in labels]
    successful = correct = 0
    for actual, predicted in pairs:
        if predicted is None:
            continue
        successful += 1
        correct += actual == predicted
        matrix[index[actual]][index[predicted]] += 1
    per_label: dict[str, LabelScores] = {}
    for i, label in enumerate(labels):
        tp = matrix[i][i]
        predicted_n = sum(row[i] for row in matrix)
        support = sum(matrix[i])
        p, r = safe(tp, predicted_n), safe(tp, support)
        per_label[label] = LabelScores(
            precision=p, recall=r, f1=safe(2 * p * r, p + r), support=support
        )
    n = len(pairs)
    failures = n - successful
    return Classification(
        rows=n,
        successful=successful,
        correct=correct,
        accuracy=safe(correct, successful),
        overall_accuracy=safe(correct, n),
        success_rate=safe(successful, n),
        failures=failures,
        failure_rate=safe(failures, n),
        macro_f1=safe(math.fsum(s.f1 for s in per_label.values()), len(per_label)),
        per_label=per_label,
        confusion=Confusion(labels=labels, matrix=matrix),
    )


# -- calibration ---------------------------------------------------------------------------


class Bucket(Out):
    index: int
    lower: float
    upper: float
    count: int
    mean_confidence: float
    accuracy: float
    gap: float


class Calibration(Out):
    count: int
    ece: float
    buckets: list[Bucket]


def bucket_index(confidence: float) -> int:
    return BUCKETS - 1 if confidence == 1.0 else math.floor(confidence * BUCKETS)


def calibration(items: Sequence[tuple[float, bool]]) -> Calibration:
    """Reliability table and weighted ECE over (confidence, correct) pairs."""
    groups: list[list[tuple[float, bool]]] = [[] for _ in range(BUCKETS)]
    for confidence, correct in items:
        groups[bucket_index(confidence)].append((confidence, correct))
    n = len(items)
    buckets: list[Bucket] = []
    for i, group in enumerate(groups):
        count = len(group)
        mean = safe(math.fsum(c for c, _ in group), count)
        accuracy = safe(sum(ok for _, ok in group), count)
        buckets.append(
            Bucket(
                index=i,
                lower=i / BUCKETS,
                upper=(i + 1) / BUCKETS,
                count=count,
                mean_confidence=mean,
                accuracy=accuracy,
                gap=abs(mean - accuracy),
            )
        )
    ece = math.fsum(safe(b.count, n) * b.gap for b in buckets)
    return Calibration(count=n, ece=ece, buckets=buckets)


# -- selective prediction --------------------------------------------------------------------


class CurvePoint(Out):
    coverage: float
    risk: float
    threshold: float


class SweepPoint(Out):
    threshold: float
    accepted: int
    coverage: float
    risk: float
    review_rate: float


class Selective(Out):
    count: int
    aurc: float
    curve: list[CurvePoint]
    sweep: list[SweepPoint]


def selective(
    items: Sequence[tuple[float, bool]], sweep: Iterable[float] = DEFAULT_SWEEP
) -> Selective:
    """Risk-coverage curve (confidence descending, ties in row order), AURC and a sweep."""
    order = sorted(range(len(items)), key=lambda i: -items[i][0])  # sorted() is stable
    n = len(items)
    curve: list[CurvePoint] = []
    errors = 0
    for k, i in enumerate(order, start=1):
        confidence, correct = items[i]
        errors += not correct
        # model_construct: plain floats computed here; validation per point would dominate
        curve.append(
            CurvePoint.model_construct(coverage=k / n, risk=errors / k, threshold=confidence)
        )
    aurc = safe(math.fsum(p.risk for p in curve), n)
    points: list[SweepPoint] = []
    for t in sweep:
        accepted = [ok for c, ok in items if c >= t]
        wrong = sum(not ok for ok in accepted)
        coverage = safe(len(accepted), n)
        points.append(
            SweepPoint(
                threshold=t,
                accepted=len(accepted),
                coverage=coverage,
                risk=safe(wrong, len(accepted)),
                review_rate=safe(n - len(accepted), n),
            )
        )
    return Selective(count=n, aurc=aurc, curve=curve, sweep=points)


# -- binary judgments ------------------------------------------------------------------------


class Component(Out):
    count: int
    accuracy: float
    brier: float
    ece: float
    positives: int
    predicted_positives: int


def brier(items: Sequence[tuple[float, bool]]) -> float:
    return safe(math.fsum((p - float(y)) ** 2 for p, y in items), len(items))


def component(items: Sequence[tuple[float, bool]]) -> Component:
    """One binary judgment against its labels: (P(true), label) pairs."""
    correct = [(p >= 0.5) == y for p, y in items]
    confidence = [(max(p, 1.0 - p), ok) for (p, _), ok in zip(items, correct, strict=True)]
    return Component(
        count=len(items),
        accuracy=safe(sum(correct), len(items)),
        brier=brier(items),
        ece=calibration(confidence).ece,
        positives=sum(y for _, y in items),
        predicted_positives=sum(p >= 0.5 for p, _ in items),
    )


# -- latency -------------------------------------------------------------------------------------


class Latency(Out):
    count: int
    p50_ms: float | None = None
    p95_ms: float | None = None
    min_ms: float | None = None
    max_ms: float | None = None
    mean_ms: float | None = None


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear interpolation at position (n - 1) * q of sorted values."""
    position = (len(sorted_values) - 1) * q
    low = math.floor(position)
    high = min(low + 1, len(sorted_values) - 1)
    fraction = position - low
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * fraction


def latency(values: Iterable[float]) -> Latency:
    ordered = sorted(values)
    if not ordered:
        return Latency(count=0)
    return Latency(
        count=len(ordered),
        p50_ms=percentile(ordered, 0.5),
        p95_ms=percentile(ordered, 0.95),
        min_ms=ordered[0],
        max_ms=ordered[-1],
        mean_ms=math.fsum(ordered) / len(ordered),
    )
