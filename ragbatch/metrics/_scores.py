"""Every metric of the report, computed exactly from compact per-row numbers (pure: no I/O).

Formulas follow docs/semantics.md §3. ``safe(a, b)`` is a / b, or 0 when b is 0. Sums use
``math.fsum`` (correctly rounded), so a metric does not depend on row order except where the
definition itself does (the risk-coverage curve breaks confidence ties by row order).
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable, Iterator, Sequence

from ragbatch.core import Out as Out  # the report sections' base, re-exported

BUCKETS = 10
DEFAULT_SWEEP = (0.5, 0.8, 0.9)
CURVE_POINTS = 1000  # risk-coverage points kept in the report; AURC always uses every row


def safe(a: float, b: float) -> float:
    return a / b if b else 0.0


class ExactSum:
    """A running float sum with no rounding until it is read: ``value()`` equals ``math.fsum``
    of every value added, in any order, without keeping the values.

    Shewchuk's non-overlapping partials (the algorithm behind ``math.fsum``): each ``add``
    folds the value into a short list of partials whose exact sum is the exact running total.
    Written here because the standard library offers fsum only over a finished iterable.
    """

    __slots__ = ("_partials",)

    def __init__(self) -> None:
        self._partials: list[float] = []

    def add(self, x: float) -> None:
        partials = self._partials
        i = 0
        for y in partials:
            if abs(x) < abs(y):
                x, y = y, x
            high = x + y
            low = y - (high - x)
            if low:
                partials[i] = low
                i += 1
            x = high
        partials[i:] = [x]

    def value(self) -> float:
        return math.fsum(self._partials)


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


class ClassificationCounts:
    """The confusion counts of (actual, predicted) pairs, added one row at a time.

    Labels are kept in order of first appearance (actual before predicted), which fixes the
    order of ``perLabel`` and of the confusion matrix; a failed row (predicted None) counts in
    ``rows`` and adds no label.
    """

    __slots__ = ("cells", "rows")

    def __init__(self) -> None:
        self.rows = 0
        self.cells: dict[tuple[str, str], int] = {}  # in order of each pair's first row

    def add(self, actual: str, predicted: str | None) -> None:
        self.rows += 1
        if predicted is None:
            return
        key = (actual, predicted)
        self.cells[key] = self.cells.get(key, 0) + 1  # 13 times a row in a run's report

    @property
    def labels(self) -> list[str]:
        """Every label in order of first appearance, actual before predicted: a label first
        appears in a pair not seen before, so the pairs' order gives it."""
        return list(dict.fromkeys(label for pair in self.cells for label in pair))

    def result(self) -> Classification:
        labels = self.labels
        index = {label: i for i, label in enumerate(labels)}
        matrix = [[0] * len(labels) for _ in labels]
        for (actual, predicted), count in self.cells.items():
            matrix[index[actual]][index[predicted]] = count
        successful = sum(self.cells.values())
        correct = sum(count for (a, p), count in self.cells.items() if a == p)
        per_label: dict[str, LabelScores] = {}
        for i, label in enumerate(labels):
            tp = matrix[i][i]
            predicted_n = sum(row[i] for row in matrix)
            support = sum(matrix[i])
            p, r = safe(tp, predicted_n), safe(tp, support)
            per_label[label] = LabelScores(
                precision=p, recall=r, f1=safe(2 * p * r, p + r), support=support
            )
        n = self.rows
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


def classification(pairs: Iterable[tuple[str, str | None]]) -> Classification:
    """``pairs`` = (actual, predicted or None for a failed row), one per labelled row."""
    counts = ClassificationCounts()
    for actual, predicted in pairs:
        counts.add(actual, predicted)
    return counts.result()


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


class CalibrationCounts:
    """Reliability buckets of (confidence, correct) pairs, added one at a time: per bucket a
    count, an exact confidence sum and the correct count."""

    __slots__ = ("correct", "counts", "sums")

    def __init__(self) -> None:
        self.counts = [0] * BUCKETS
        self.correct = [0] * BUCKETS
        self.sums = [ExactSum() for _ in range(BUCKETS)]

    def add(self, confidence: float, correct: bool) -> None:
        i = bucket_index(confidence)
        self.counts[i] += 1
        self.correct[i] += correct
        self.sums[i].add(confidence)

    def result(self) -> Calibration:
        n = sum(self.counts)
        buckets: list[Bucket] = []
        for i, count in enumerate(self.counts):
            mean = safe(self.sums[i].value(), count)
            accuracy = safe(self.correct[i], count)
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


def calibration(items: Iterable[tuple[float, bool]]) -> Calibration:
    """Reliability table and weighted ECE over (confidence, correct) pairs."""
    counts = CalibrationCounts()
    for confidence, correct in items:
        counts.add(confidence, correct)
    return counts.result()


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
    curve_step: int | None = None  # set when the curve keeps every N-th point (large runs)
    curve: list[CurvePoint]
    sweep: list[SweepPoint]


class ScoredColumns:
    """(confidence, correct) pairs in row order as two flat columns: 9 bytes a pair, so a
    million scored rows cost 9 MB rather than a million tuples."""

    __slots__ = ("confidence", "correct")

    def __init__(self) -> None:
        self.confidence = array("d")
        self.correct = bytearray()

    def add(self, confidence: float, correct: bool) -> None:
        self.confidence.append(confidence)
        self.correct.append(correct)

    def __len__(self) -> int:
        return len(self.correct)

    def pairs(self) -> Iterator[tuple[float, bool]]:
        for confidence, correct in zip(self.confidence, self.correct, strict=True):
            yield confidence, bool(correct)


def selective(
    items: Iterable[tuple[float, bool]] | ScoredColumns,
    sweep: Iterable[float] = DEFAULT_SWEEP,
    max_points: int = CURVE_POINTS,
) -> Selective:
    """Risk-coverage curve (confidence descending, ties in row order), AURC and a sweep.

    AURC always uses every point; above ``max_points`` rows the curve itself keeps every
    ``curveStep``-th point and the last one.
    """
    if not isinstance(items, ScoredColumns):
        columns = ScoredColumns()
        for confidence, correct in items:
            columns.add(confidence, correct)
        items = columns
    confidences, oks = items.confidence, items.correct
    n = len(items)
    # sorted() is stable, also with reverse=True: equal confidences stay in row order
    order = sorted(range(n), key=confidences.__getitem__, reverse=True)
    step = max(1, math.ceil(n / max_points))
    curve: list[CurvePoint] = []
    risks = ExactSum()
    errors = 0
    for k, i in enumerate(order, start=1):
        errors += not oks[i]
        risk = errors / k
        risks.add(risk)
        if k % step == 0 or k == n:
            # model_construct: plain floats computed here; validation per point would dominate
            curve.append(
                CurvePoint.model_construct(coverage=k / n, risk=risk, threshold=confidences[i])
            )
    del order
    points: list[SweepPoint] = []
    for t in sweep:
        accepted = wrong = 0
        for confidence, ok in zip(confidences, oks, strict=True):
            if confidence >= t:
                accepted += 1
                wrong += not ok
        coverage = safe(accepted, n)
        points.append(
            SweepPoint(
                threshold=t,
                accepted=accepted,
                coverage=coverage,
                risk=safe(wrong, accepted),
                review_rate=safe(n - accepted, n),
            )
        )
    return Selective(
        count=n,
        aurc=safe(risks.value(), n),
        curve_step=step if step > 1 else None,
        curve=curve,
        sweep=points,
    )


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


class ComponentCounts:
    """One binary judgment against its labels, added one (P(true), label) pair at a time."""

    __slots__ = ("calibration", "correct", "count", "positives", "predicted", "squares")

    def __init__(self) -> None:
        self.count = self.correct = self.positives = self.predicted = 0
        self.squares = ExactSum()
        self.calibration = CalibrationCounts()

    def add(self, p: float, label: bool) -> None:
        ok = (p >= 0.5) == label
        self.count += 1
        self.correct += ok
        self.positives += label
        self.predicted += p >= 0.5
        self.squares.add((p - float(label)) ** 2)
        self.calibration.add(max(p, 1.0 - p), ok)

    def result(self) -> Component:
        return Component(
            count=self.count,
            accuracy=safe(self.correct, self.count),
            brier=safe(self.squares.value(), self.count),
            ece=self.calibration.result().ece,
            positives=self.positives,
            predicted_positives=self.predicted,
        )


def component(items: Iterable[tuple[float, bool]]) -> Component:
    """One binary judgment against its labels: (P(true), label) pairs."""
    counts = ComponentCounts()
    for p, label in items:
        counts.add(p, label)
    return counts.result()


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
    """Percentiles, extremes and mean; the values are sorted once (a column of floats is
    enough: ``array('d')`` keeps a million latencies in 8 MB)."""
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
