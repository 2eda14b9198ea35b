"""The PPI++ estimator against hand-computed values, and unbiased under both sampling designs."""

from __future__ import annotations

import math
import random
import statistics

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragbatch.core._errors import ConfigError
from ragbatch.metrics._ppi import Labelled, Population, labels_needed, ppi_rate

Z95 = 1.959963984540054


def test_hand_computed_two_strata() -> None:
    # Stratum A: 10 rows, the judge says 1 on all; 4 labelled (1, 1, 1, 0), weight 10/4.
    # Stratum B: 30 rows, the judge says 0 on all; 3 labelled (0, 0, 1), weight 30/3.
    population = {"A": Population(10, 10.0), "B": Population(30, 0.0)}
    labelled = [Labelled("A", y, 1.0, 2.5) for y in (1, 1, 1, 0)]
    labelled += [Labelled("B", y, 0.0, 10.0) for y in (0, 0, 1)]
    e = ppi_rate(population, labelled)
    assert e is not None
    # The verdict is constant in each stratum: no variance to tune on, lambda = 0, and the
    # estimate is the stratified mean 10/40 * 3/4 + 30/40 * 1/3 = 0.4375.
    assert e.judge_weight == 0.0 and e.stratified
    assert e.estimate == pytest.approx(0.4375)
    assert e.judge_rate == 0.25
    # Variance, each stratum with two pseudo-labels (1 and 0):
    # A: (1,1,1,0,1,0): sum of squares 4/3, / (6 * 5), fpc 1 - 4/10 -> 0.0266667
    # B: (0,0,1,1,0): sum of squares 1.2, / (5 * 4), fpc 1 - 3/30 -> 0.054
    variance = 0.25**2 * (4 / 3 / 30 * 0.6) + 0.75**2 * (1.2 / 20 * 0.9)
    assert variance == pytest.approx(0.0320417, rel=1e-5)
    assert e.standard_error == pytest.approx(math.sqrt(variance))
    assert (e.low, e.high) == pytest.approx(
        (0.4375 - Z95 * math.sqrt(variance), 0.4375 + Z95 * math.sqrt(variance))
    )
    # Labels only: the 7 labels weighted 2.5 (inclusion 0.4) and 10 (0.1) plus the pseudo-
    # labels at the mean weight 40/7 (inclusion 0.175), padded mean m = 162.5 / 360; each
    # term weight^2 * (1 - inclusion) * (y - m)^2, times 9/8 / (sum of weights = 360/7)^2.
    m = 162.5 / 360
    terms = 6.25 * 0.6 * (3 * (1 - m) ** 2 + m**2) + 100 * 0.9 * (2 * m**2 + (1 - m) ** 2)
    terms += (40 / 7) ** 2 * 0.825 * ((1 - m) ** 2 + m**2)
    only_variance = terms * 9 / 8 / (360 / 7) ** 2
    assert only_variance == pytest.approx(0.0346699, rel=1e-5)
    assert e.labels_only.estimate == pytest.approx(0.4375)
    assert e.labels_only.high - e.labels_only.estimate == pytest.approx(
        Z95 * math.sqrt(only_variance), rel=1e-5
    )
    assert e.effective_labels == pytest.approx(7 * only_variance / variance, rel=1e-5)


def test_lambda_is_tuned_when_the_verdict_varies_within_the_stratum() -> None:
    # One stratum of 100 rows, the judge says 1 on 40; labels agree with the judge on 9 of
    # 10. The judge carries information: lambda > 0 and the interval beats labels only.
    population = {"all": Population(100, 40.0)}
    pairs = [(1, 1)] * 4 + [(0, 0)] * 5 + [(1, 0)]
    labelled = [Labelled("all", y, f, 10.0) for y, f in pairs]
    e = ppi_rate(population, labelled)
    assert e is not None
    assert 0.0 < e.judge_weight <= 1.0
    assert e.high - e.low < e.labels_only.high - e.labels_only.low
    # estimate = lambda * 0.4 + mean(y) - lambda * mean(f) = 0.5 + lambda * (0.4 - 0.4)
    assert e.estimate == pytest.approx(0.5)


def test_a_useless_judge_falls_back_to_the_labels() -> None:
    population = {"all": Population(50, 25.0)}
    pairs = [(1, 0), (0, 1), (1, 1), (0, 0), (1, 0), (0, 1)]  # verdict unrelated to the truth
    e = ppi_rate(population, [Labelled("all", y, f, 50 / 6) for y, f in pairs])
    assert e is not None
    assert e.high - e.low <= e.labels_only.high - e.labels_only.low + 1e-12


def test_nothing_labelled_is_none_and_confidence_is_checked() -> None:
    assert ppi_rate({"all": Population(10, 3.0)}, []) is None
    with pytest.raises(ConfigError, match="--confidence"):
        ppi_rate({"all": Population(10, 3.0)}, [Labelled("all", 1, 1, 10.0)], confidence=1.0)


def test_labels_needed_inverts_the_variance() -> None:
    # S2 = 0.25 (p = 1/2), 1000 rows: n labels give V = 0.25 (1/n - 1/1000).
    variance = 0.25 * (1 / 100 - 1 / 1000)
    need = labels_needed(100, 1000, variance, 0.05, Z95)
    assert 0.25 * (1 / need - 1 / 1000) <= (0.05 / Z95) ** 2
    assert 0.25 * (1 / (need - 1) - 1 / 1000) > (0.05 / Z95) ** 2
    assert need == 278


# -- both designs estimate the same rate -------------------------------------------------------


def _rows() -> list[tuple[str, int, int]]:
    """400 rows (stratum, truth, verdict): stratum A is a quarter of them and fails more; the
    judge is right 85 % of the time, so its verdict varies within each stratum (lambda works)."""
    rng = random.Random(1)
    rows = []
    for i in range(400):
        stratum = "A" if i % 4 == 0 else "B"
        truth = int(rng.random() < (0.6 if stratum == "A" else 0.2))
        verdict = truth if rng.random() < 0.85 else 1 - truth
        rows.append((stratum, truth, verdict))
    return rows


def _estimate(rows: list[tuple[str, int, int]], chosen: list[int], pi: dict[str, float]) -> float:
    strata = {key for key, _, _ in rows} if len(pi) > 1 else {"all"}
    population = {
        key: Population(
            sum(1 for s, _, _ in rows if key in (s, "all")),
            float(sum(f for s, _, f in rows if key in (s, "all"))),
        )
        for key in strata
    }
    items = [
        Labelled(rows[i][0] if len(pi) > 1 else "all", rows[i][1], rows[i][2], 1 / pi[rows[i][0]])
        for i in chosen
    ]
    e = ppi_rate(population, items)
    assert e is not None
    return e.estimate


def test_uniform_and_stratified_samples_agree_in_expectation() -> None:
    rows = _rows()
    truth = statistics.fmean(t for _, t, _ in rows)
    a = [i for i, r in enumerate(rows) if r[0] == "A"]
    b = [i for i, r in enumerate(rows) if r[0] == "B"]
    rng = random.Random(2)
    # 40 labels either way: uniform (inclusion 0.1), or 20 + 20 (inclusion 0.2 in A and
    # 1/15 in B: unequal weights, so a wrong weighting would show as a bias).
    uniform = [
        _estimate(rows, rng.sample(range(400), 40), {"A": 0.1, "B": 0.1}) for _ in range(3000)
    ]
    stratified = [
        _estimate(rows, rng.sample(a, 20) + rng.sample(b, 20), {"A": 20 / 100, "B": 20 / 300})
        for _ in range(3000)
    ]
    # Monte Carlo error of each mean is about 0.0012; lambda's own tuning costs O(1/n).
    assert statistics.fmean(uniform) == pytest.approx(truth, abs=0.006)
    assert statistics.fmean(stratified) == pytest.approx(truth, abs=0.006)
    assert statistics.fmean(uniform) == pytest.approx(statistics.fmean(stratified), abs=0.008)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 1), st.integers(0, 1)), min_size=1, max_size=30),
    st.integers(1, 5),
)
def test_rates_and_intervals_stay_in_the_unit_interval(
    pairs: list[tuple[int, int]], k: int
) -> None:
    population = {"all": Population(len(pairs) * k, float(sum(f for _, f in pairs) * k))}
    e = ppi_rate(population, [Labelled("all", y, f, float(k)) for y, f in pairs])
    assert e is not None
    assert 0.0 <= e.low <= e.estimate <= e.high <= 1.0
    assert e.high - e.low <= e.labels_only.high - e.labels_only.low + 1e-12
