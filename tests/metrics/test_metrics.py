"""Metrics: hand-computed tables for every formula of docs/semantics.md §3, plus properties."""

from __future__ import annotations

import functools
import math
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragbatch.core._pricing import PricingSnapshot, parse_pricing, total_cost
from ragbatch.metrics import _scores as m

ROOT = Path(__file__).resolve().parents[2]
SNAPSHOT = ROOT / "pricing" / "typesafe-2026-12.json"


# -- safe division --------------------------------------------------------------------------------


def test_safe_divides_or_gives_zero() -> None:
    assert m.safe(1, 4) == 0.25
    assert m.safe(3, 0) == 0.0
    assert m.safe(0, 0) == 0.0


# -- classification -------------------------------------------------------------------------------

# (actual, predicted or None for a failed row). Labels: A first (row 1), then B (row 2
# actual), then C (row 4 actual). Failed rows only carry labels already seen.
PAIRS: list[tuple[str, str | None]] = [
    ("A", "A"),
    ("B", "A"),
    ("A", None),
    ("C", "B"),
    ("B", "B"),
    ("B", None),
]


def test_classification_hand_example() -> None:
    c = m.classification(PAIRS)
    assert c.confusion.labels == ["A", "B", "C"]
    # rows: actual, columns: predicted
    assert c.confusion.matrix == [[1, 0, 0], [1, 1, 0], [0, 1, 0]]
    assert (c.rows, c.successful, c.correct, c.failures) == (6, 4, 2, 2)
    assert c.accuracy == 2 / 4
    assert c.overall_accuracy == 2 / 6
    assert c.success_rate == 4 / 6
    assert c.failure_rate == 2 / 6
    a, b, cc = c.per_label["A"], c.per_label["B"], c.per_label["C"]
    assert (a.precision, a.recall, a.support) == (0.5, 1.0, 1)
    assert a.f1 == pytest.approx(2 / 3, rel=1e-15)
    assert (b.precision, b.recall, b.f1, b.support) == (0.5, 0.5, 0.5, 2)
    # C is never predicted: precision, recall and F1 all fall back to 0 via safe()
    assert (cc.precision, cc.recall, cc.f1, cc.support) == (0.0, 0.0, 0.0, 1)
    assert c.macro_f1 == pytest.approx((2 / 3 + 0.5 + 0.0) / 3, rel=1e-15)
    assert list(c.per_label) == ["A", "B", "C"]


def test_classification_labels_actual_then_predicted_row_by_row() -> None:
    c = m.classification([("B", "D"), ("C", "B"), ("A", "A")])
    assert c.confusion.labels == ["B", "D", "C", "A"]
    assert c.confusion.matrix == [
        [0, 1, 0, 0],
        [0, 0, 0, 0],
        [1, 0, 0, 0],
        [0, 0, 0, 1],
    ]
    d = c.per_label["D"]
    assert (d.precision, d.recall, d.f1, d.support) == (0.0, 0.0, 0.0, 0)


def test_classification_empty() -> None:
    c = m.classification([])
    assert (c.rows, c.successful, c.correct, c.failures) == (0, 0, 0, 0)
    assert (c.accuracy, c.overall_accuracy, c.success_rate, c.failure_rate, c.macro_f1) == (
        0.0,
        0.0,
        0.0,
        0.0,
        0.0,
    )
    assert c.confusion.labels == []
    assert c.per_label == {}


def test_classification_perfect() -> None:
    c = m.classification([("A", "A"), ("B", "B"), ("A", "A")])
    assert (c.accuracy, c.overall_accuracy, c.macro_f1, c.success_rate) == (1.0, 1.0, 1.0, 1.0)


def test_classification_all_failed() -> None:
    c = m.classification([("A", None), ("B", None)])
    assert (c.rows, c.successful, c.correct, c.failures) == (2, 0, 0, 2)
    assert (c.accuracy, c.overall_accuracy, c.success_rate, c.failure_rate) == (0.0, 0.0, 0.0, 1.0)
    assert c.macro_f1 == 0.0


def test_classification_failed_rows_add_no_labels() -> None:
    # §4: classification is over successful rows; the showcase (jev-starter
    # evals/runners/evaluate.ts) builds labels from successful samples only. A label seen
    # only on a failed row must not enter the confusion matrix or dilute macroF1.
    c = m.classification([("A", "A"), ("B", None)])
    assert c.confusion.labels == ["A"]
    assert c.confusion.matrix == [[1]]
    assert c.macro_f1 == 1.0
    assert (c.overall_accuracy, c.failure_rate) == (0.5, 0.5)


def test_classification_failed_rows_do_not_decide_label_order() -> None:
    c = m.classification([("B", None), ("A", "A"), ("B", "B")])
    assert c.confusion.labels == ["A", "B"]


# -- calibration ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("confidence", "index"),
    [
        (0.0, 0),
        (0.05, 0),
        (0.0999, 0),
        (0.1, 1),
        (0.5, 5),
        (0.8, 8),
        (0.95, 9),
        (0.9999, 9),
        (1.0, 9),
    ],
)
def test_bucket_index(confidence: float, index: int) -> None:
    assert m.bucket_index(confidence) == index


def test_calibration_hand_example() -> None:
    items = [(0.95, True), (0.95, False), (1.0, True), (0.1, True), (0.05, False), (0.55, True)]
    cal = m.calibration(items)
    assert cal.count == 6
    assert [b.index for b in cal.buckets] == list(range(10))
    assert [b.count for b in cal.buckets] == [1, 1, 0, 0, 0, 1, 0, 0, 0, 3]
    for b in cal.buckets:
        assert b.lower == b.index / 10
        assert b.upper == (b.index + 1) / 10
    b0, b1, b5, b9 = (cal.buckets[i] for i in (0, 1, 5, 9))
    assert (b0.mean_confidence, b0.accuracy, b0.gap) == (0.05, 0.0, 0.05)
    assert (b1.mean_confidence, b1.accuracy) == (0.1, 1.0)
    assert b1.gap == pytest.approx(0.9, rel=1e-15)
    assert (b5.mean_confidence, b5.accuracy) == (0.55, 1.0)
    assert b5.gap == pytest.approx(0.45, rel=1e-15)
    assert b9.mean_confidence == pytest.approx(2.9 / 3, rel=1e-15)
    assert b9.accuracy == 2 / 3
    assert b9.gap == pytest.approx(0.3, rel=1e-14)
    empty = cal.buckets[3]
    assert (empty.count, empty.mean_confidence, empty.accuracy, empty.gap) == (0, 0.0, 0.0, 0.0)
    # ECE = sum(count / N * gap) = (3 * 0.3 + 0.9 + 0.05 + 0.45) / 6
    assert cal.ece == pytest.approx(2.3 / 6, rel=1e-14)


def test_calibration_perfectly_calibrated_certainty() -> None:
    cal = m.calibration([(1.0, True), (0.0, False)])
    # confidence 0 and wrong is calibrated; confidence 1 and right too
    assert cal.ece == 0.0


def test_calibration_empty_reports_every_bucket() -> None:
    cal = m.calibration([])
    assert cal.count == 0
    assert cal.ece == 0.0
    assert len(cal.buckets) == 10
    assert all(b.count == 0 and b.gap == 0.0 for b in cal.buckets)


# -- selective ------------------------------------------------------------------------------------

SELECTIVE = [(0.9, True), (0.6, False), (0.9, False), (0.3, True), (0.6, True)]


def test_selective_curve_hand_example() -> None:
    s = m.selective(SELECTIVE)
    # order: rows 0, 2 (tie at 0.9, row order), 1, 4 (tie at 0.6, row order), 3
    assert s.count == 5
    assert [p.threshold for p in s.curve] == [0.9, 0.9, 0.6, 0.6, 0.3]
    assert [p.coverage for p in s.curve] == [1 / 5, 2 / 5, 3 / 5, 4 / 5, 5 / 5]
    assert [p.risk for p in s.curve] == [0 / 1, 1 / 2, 2 / 3, 2 / 4, 2 / 5]
    assert s.aurc == pytest.approx((0 + 1 / 2 + 2 / 3 + 2 / 4 + 2 / 5) / 5, rel=1e-15)


def test_selective_ties_keep_row_order() -> None:
    wrong_first = m.selective([(0.7, False), (0.7, True)])
    right_first = m.selective([(0.7, True), (0.7, False)])
    assert [p.risk for p in wrong_first.curve] == [1.0, 0.5]
    assert [p.risk for p in right_first.curve] == [0.0, 0.5]
    assert wrong_first.aurc == (1.0 + 0.5) / 2
    assert right_first.aurc == (0.0 + 0.5) / 2


def test_selective_default_sweep() -> None:
    sweep = m.selective(SELECTIVE).sweep
    assert [p.threshold for p in sweep] == [0.5, 0.8, 0.9]
    assert [p.accepted for p in sweep] == [4, 2, 2]  # c >= t: 0.9 counts at t = 0.9
    assert [p.coverage for p in sweep] == [4 / 5, 2 / 5, 2 / 5]
    assert [p.risk for p in sweep] == [2 / 4, 1 / 2, 1 / 2]
    assert [p.review_rate for p in sweep] == pytest.approx([1 / 5, 3 / 5, 3 / 5], rel=1e-15)


def test_selective_custom_sweep_with_nothing_accepted() -> None:
    (point,) = m.selective(SELECTIVE, sweep=[1.0]).sweep
    assert (point.threshold, point.accepted, point.coverage, point.risk) == (1.0, 0, 0.0, 0.0)
    assert point.review_rate == 1.0


def test_selective_curve_is_thinned_above_max_points_but_aurc_uses_every_row() -> None:
    rng = random.Random(5)
    items = [(round(rng.random(), 2), rng.random() < 0.7) for _ in range(2500)]
    full = m.selective(items, max_points=10_000)
    thin = m.selective(items, max_points=1000)
    assert (full.curve_step, len(full.curve)) == (None, 2500)
    assert thin.curve_step == 3  # ceil(2500 / 1000)
    assert thin.curve == [p for k, p in enumerate(full.curve, start=1) if k % 3 == 0 or k == 2500]
    assert thin.curve[-1].coverage == 1.0
    assert thin.aurc == full.aurc == math.fsum(p.risk for p in full.curve) / 2500
    assert thin.sweep == full.sweep


def test_exact_sum_equals_fsum_in_any_order() -> None:
    rng = random.Random(11)
    for _ in range(200):
        values = [
            rng.uniform(-1, 1) * 10 ** rng.randint(-30, 30) for _ in range(rng.randint(0, 200))
        ]
        total = m.ExactSum()
        for v in values:
            total.add(v)
        assert total.value() == math.fsum(values)
        rng.shuffle(values)
        again = m.ExactSum()
        for v in values:
            again.add(v)
        assert again.value() == total.value()


def test_selective_empty() -> None:
    s = m.selective([])
    assert (s.count, s.aurc, s.curve) == (0, 0.0, [])
    assert all(
        (p.accepted, p.coverage, p.risk, p.review_rate) == (0, 0.0, 0.0, 0.0) for p in s.sweep
    )


# -- brier and component metrics ------------------------------------------------------------------


def test_brier_hand_example() -> None:
    assert m.brier([(0.9, True), (0.2, False), (0.5, True)]) == pytest.approx(
        (0.01 + 0.04 + 0.25) / 3, rel=1e-14
    )
    assert m.brier([(1.0, True), (0.0, False)]) == 0.0
    assert m.brier([(0.0, True), (1.0, False)]) == 1.0
    assert m.brier([]) == 0.0


def test_component_hand_example() -> None:
    items = [(0.9, True), (0.5, True), (0.5, False), (0.2, True), (0.0, False)]
    c = m.component(items)
    # p >= 0.5 predicts true: right, right (0.5 counts as true), wrong, wrong, right
    assert c.count == 5
    assert c.accuracy == 3 / 5
    assert c.positives == 3
    assert c.predicted_positives == 3
    assert c.brier == pytest.approx((0.01 + 0.25 + 0.25 + 0.64 + 0.0) / 5, rel=1e-14)
    # confidence max(p, 1 - p): 0.9 ok, 0.5 ok, 0.5 wrong, 0.8 wrong, 1.0 ok
    # buckets 9: {0.9, 1.0} acc 1 gap 0.05; 5: {0.5, 0.5} acc .5 gap 0; 8: {0.8} acc 0 gap .8
    assert c.ece == pytest.approx(2 / 5 * 0.05 + 1 / 5 * 0.8, rel=1e-14)
    assert (
        c.ece
        == m.calibration(
            [(0.9, True), (0.5, True), (0.5, False), (1.0 - 0.2, False), (1.0, True)]
        ).ece
    )


def test_component_empty() -> None:
    c = m.component([])
    assert (c.count, c.accuracy, c.brier, c.ece, c.positives, c.predicted_positives) == (
        0,
        0.0,
        0.0,
        0.0,
        0,
        0,
    )


# -- latency --------------------------------------------------------------------------------------


def test_latency_interpolates_at_n_minus_one_q() -> None:
    lat = m.latency([400.0, 100.0, 300.0, 200.0])
    assert lat.count == 4
    assert lat.p50_ms == 250.0  # position 1.5
    assert lat.p95_ms == pytest.approx(385.0, rel=1e-15)  # position 2.85
    assert (lat.min_ms, lat.max_ms, lat.mean_ms) == (100.0, 400.0, 250.0)


@pytest.mark.parametrize(
    ("values", "p50", "p95"),
    [
        ([7.0], 7.0, 7.0),
        ([0.0, 10.0], 5.0, 9.5),
        ([1.0, 2.0, 3.0], 2.0, 2.9),
        ([5.0, 5.0, 5.0, 5.0, 5.0], 5.0, 5.0),
    ],
)
def test_latency_percentiles(values: list[float], p50: float, p95: float) -> None:
    lat = m.latency(values)
    assert lat.p50_ms == pytest.approx(p50, rel=1e-15)
    assert lat.p95_ms == pytest.approx(p95, rel=1e-15)


def test_latency_empty() -> None:
    lat = m.latency([])
    assert lat.count == 0
    assert (lat.p50_ms, lat.p95_ms, lat.min_ms, lat.max_ms, lat.mean_ms) == (
        None,
        None,
        None,
        None,
        None,
    )


def test_latency_accepts_any_iterable() -> None:
    assert m.latency(iter([3.0, 1.0, 2.0])).p50_ms == 2.0


# -- properties -----------------------------------------------------------------------------------

probability = st.one_of(
    st.sampled_from([0.0, 0.1, 0.5, 0.9, 0.95, 1.0]), st.floats(0.0, 1.0, allow_subnormal=False)
)
scored = st.lists(st.tuples(probability, st.booleans()), max_size=40)
labels = st.sampled_from(["PASS", "RETRIEVAL_MISS", "GENERATOR_UNGROUNDED", "JUDGE_UNCERTAIN"])
pairs = st.lists(st.tuples(labels, st.none() | labels), max_size=40)
latencies = st.lists(st.floats(0.0, 1e6, allow_subnormal=False), max_size=40)


def unit(x: float) -> bool:
    return 0.0 <= x <= 1.0


@settings(max_examples=200)
@given(pairs)
def test_classification_rates_are_in_unit_interval(rows: list[tuple[str, str | None]]) -> None:
    c = m.classification(rows)
    for x in (c.accuracy, c.overall_accuracy, c.success_rate, c.failure_rate, c.macro_f1):
        assert unit(x)
    for s in c.per_label.values():
        assert unit(s.precision) and unit(s.recall) and unit(s.f1)
    assert c.successful + c.failures == c.rows
    assert c.correct <= c.successful


@settings(max_examples=200)
@given(scored)
def test_scored_metrics_are_in_unit_interval(items: list[tuple[float, bool]]) -> None:
    cal = m.calibration(items)
    assert unit(cal.ece)
    assert sum(b.count for b in cal.buckets) == len(items)
    for b in cal.buckets:
        assert unit(b.mean_confidence) and unit(b.accuracy) and unit(b.gap)
        if b.count:
            # floor(c * 10) in floats: 0.8999999999999999 * 10 == 9.0 lands in bucket 9
            assert b.lower - 1e-15 <= b.mean_confidence <= b.upper
    s = m.selective(items)
    assert unit(s.aurc)
    for p in s.curve:
        assert unit(p.coverage) and unit(p.risk) and unit(p.threshold)
    for q in s.sweep:
        assert unit(q.coverage) and unit(q.risk) and unit(q.review_rate)
    assert unit(m.brier(items))
    comp = m.component(items)
    assert unit(comp.accuracy) and unit(comp.brier) and unit(comp.ece)


def canonical(c: m.Classification) -> object:
    """Everything of a classification except the order labels first appeared in."""
    labels = c.confusion.labels
    cells = {
        (labels[i], labels[j]): n
        for i, row in enumerate(c.confusion.matrix)
        for j, n in enumerate(row)
    }
    numbers = c.model_dump(exclude={"confusion", "per_label"})
    return numbers, c.per_label, sorted(labels), cells


@settings(max_examples=200)
@given(pairs, st.data())
def test_classification_is_row_order_independent(
    rows: list[tuple[str, str | None]], data: st.DataObject
) -> None:
    # label order is first appearance by definition; every number is order-free
    shuffled = data.draw(st.permutations(rows))
    assert canonical(m.classification(shuffled)) == canonical(m.classification(rows))


@settings(max_examples=200)
@given(pairs)
def test_classification_labels_are_in_order_of_first_appearance(
    rows: list[tuple[str, str | None]],
) -> None:
    # the definition, label by label: actual before predicted, failed rows add none
    order: list[str] = []
    for actual, predicted in rows:
        for label in (actual, predicted) if predicted is not None else ():
            if label not in order:
                order.append(label)
    assert m.classification(rows).confusion.labels == order


@settings(max_examples=200)
@given(scored, st.data())
def test_calibration_and_component_are_row_order_independent(
    items: list[tuple[float, bool]], data: st.DataObject
) -> None:
    shuffled = data.draw(st.permutations(items))
    assert m.calibration(shuffled) == m.calibration(items)
    assert m.component(shuffled) == m.component(items)
    assert m.brier(shuffled) == m.brier(items)


@settings(max_examples=200)
@given(latencies, st.data())
def test_latency_is_row_order_independent(values: list[float], data: st.DataObject) -> None:
    shuffled = data.draw(st.permutations(values))
    lat = m.latency(values)
    assert m.latency(shuffled) == lat
    if values:
        assert lat.min_ms is not None and lat.max_ms is not None
        assert lat.p50_ms is not None and lat.p95_ms is not None
        assert lat.min_ms <= lat.p50_ms <= lat.p95_ms <= lat.max_ms


@functools.cache
def snapshot() -> PricingSnapshot:
    """The committed snapshot, parsed once."""
    return parse_pricing(SNAPSHOT.read_bytes(), SNAPSHOT.name)


tokens = st.integers(0, 10**9)
calls = st.lists(
    st.tuples(st.sampled_from(["jev-1.13.0", "mock-jev", "recorded-baseline"]), tokens, tokens),
    max_size=20,
)


@settings(max_examples=200)
@given(calls)
def test_cost_is_linear_in_tokens(usage: list[tuple[str, int, int]]) -> None:
    once = total_cost(snapshot(), usage)
    twice = total_cost(snapshot(), [(model, 2 * i, 2 * o) for model, i, o in usage])
    assert once.available and twice.available
    assert once.usd is not None and twice.usd is not None
    assert twice.usd == 2 * once.usd
    assert twice.by_model == {k: 2 * v for k, v in once.by_model.items()}
    assert once.usd >= 0.0


@settings(max_examples=200)
@given(calls, st.data())
def test_cost_is_call_order_independent(
    usage: list[tuple[str, int, int]], data: st.DataObject
) -> None:
    shuffled = data.draw(st.permutations(usage))
    assert total_cost(snapshot(), shuffled) == total_cost(snapshot(), usage)


def test_bucket_index_follows_the_float_formula_just_below_a_bound() -> None:
    # documented as floor(c * B): the float product of the largest double below 0.9 is 9.0
    below = 0.8999999999999999
    assert below < 0.9
    assert m.bucket_index(below) == 9
