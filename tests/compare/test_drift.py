"""Distribution drift: PSI, KS and the abstention z-test, by hand and on whole reports."""

from __future__ import annotations

import copy
import json
import math
import random
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from ragbatch.compare._drift import (
    EPSILON,
    PROBABILITY_EDGES,
    DriftReport,
    Thresholds,
    bin_counts,
    compare_quantity,
    distribution_drift,
    drift_markdown,
    kolmogorov_sf,
    ks_p_value,
    ks_statistic,
    psi,
    psi_flag,
    quantile_edges,
    two_proportion_z,
)

ROOT = Path(__file__).resolve().parents[2]
T = Thresholds()


def beta(alpha: float, beta_: float, n: int, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [rng.betavariate(alpha, beta_) for _ in range(n)]


def report(rows: Sequence[dict[str, Any]], **top: Any) -> dict[str, Any]:
    return {
        "provider": {"answeredBy": ["jev-1"]},
        "pricing": {"version": "v1"},
        **top,
        "rows": rows,
    }


def judged_rows(values: Mapping[str, Sequence[float]], contexts: int = 3) -> list[dict[str, Any]]:
    """Report rows whose ``generation`` holds the given per-row probabilities."""
    n = len(next(iter(values.values())))
    chunks = {f"c{i}": 0.5 for i in range(contexts)}
    return [
        {
            "id": f"r{i}",
            "retrieval": {"chunkRelevance": chunks},
            "generation": {k: v[i] for k, v in values.items()},
        }
        for i in range(n)
    ]


# -- binning and PSI ---------------------------------------------------------------------


def test_probability_bins_are_left_closed_with_one_in_the_last() -> None:
    values = [0.0, 0.0999, 0.1, 0.3, 0.95, 1.0]
    assert bin_counts(values, PROBABILITY_EDGES, right_closed=False) == [
        2,
        1,
        0,
        1,
        0,
        0,
        0,
        0,
        0,
        2,
    ]


def test_psi_by_hand() -> None:
    a = [0.05, 0.05, 0.15, 0.25]  # bin shares 0.5, 0.25, 0.25
    b = [0.05, 0.15, 0.15, 0.15]  # bin shares 0.25, 0.75, 0 (-> epsilon)
    counts_a = bin_counts(a, PROBABILITY_EDGES, right_closed=False)
    counts_b = bin_counts(b, PROBABILITY_EDGES, right_closed=False)
    expected = (
        (0.25 - 0.5) * math.log(0.25 / 0.5)
        + (0.75 - 0.25) * math.log(0.75 / 0.25)
        + (EPSILON - 0.25) * math.log(EPSILON / 0.25)
    )
    assert psi(counts_a, counts_b) == pytest.approx(expected, rel=1e-12)
    assert expected == pytest.approx(2.6778, abs=1e-4)
    assert psi(counts_b, counts_a) == pytest.approx(expected, rel=1e-12)  # symmetric


def test_quantile_bins_of_the_baseline_by_hand() -> None:
    a = [float(x) for x in range(1, 11)]
    edges = quantile_edges(a)
    assert edges == [float(x) for x in range(1, 10)]
    assert bin_counts(a, edges, right_closed=True) == [1] * 10
    b = [3.0] * 10  # everything in (2, 3]
    expected = 0.9 * math.log(1.0 / 0.1) + 9 * (EPSILON - 0.1) * math.log(EPSILON / 0.1)
    q = compare_quantity("queryTokens", a, b, probability=False, thresholds=T)
    assert q.binning == "quantile"
    assert q.psi == pytest.approx(expected, rel=1e-12)
    assert q.flag == "drift"


def test_quantile_edges_collapse_on_discrete_data() -> None:
    assert quantile_edges([3.0] * 7) == [3.0]
    assert quantile_edges([]) == []
    assert bin_counts([3.0, 3.0, 4.0], [3.0], right_closed=True) == [2, 1]


def test_psi_rejects_empty_or_mismatched_samples() -> None:
    with pytest.raises(ValueError):
        psi([0, 0], [1, 1])
    with pytest.raises(ValueError):
        psi([1, 1], [1, 1, 1])


@pytest.mark.parametrize(
    ("value", "flag"), [(0.0, "none"), (0.0999, "none"), (0.1, "moderate"), (0.25, "drift")]
)
def test_psi_thresholds(value: float, flag: str) -> None:
    assert psi_flag(value, T) == flag


def test_identical_samples_have_no_drift() -> None:
    a = beta(2, 5, 300, seed=1)
    q = compare_quantity("generation.groundedness", a, list(reversed(a)), True, T)
    assert (q.psi, q.ks, q.ks_p_value, q.flag) == (0.0, 0.0, 1.0, "none")


def test_same_distribution_other_draw_is_not_flagged() -> None:
    q = compare_quantity("x", beta(2, 5, 3000, seed=1), beta(2, 5, 3000, seed=2), True, T)
    assert q.psi < 0.1 and q.flag == "none"
    assert q.ks_p_value > 0.01


def test_shifted_beta_is_flagged_as_drift() -> None:
    q = compare_quantity("x", beta(2, 5, 500, seed=1), beta(5, 2, 500, seed=2), True, T)
    assert q.psi >= 0.25 and q.flag == "drift"
    assert q.ks > 0.5
    assert q.ks_p_value < 1e-10


# -- Kolmogorov-Smirnov --------------------------------------------------------------------


def test_ks_statistic_by_hand() -> None:
    assert ks_statistic([1.0, 2.0, 3.0], [2.5, 4.0, 5.0]) == pytest.approx(2 / 3)
    assert ks_statistic([1.0, 1.0, 2.0], [1.0, 2.0, 2.0]) == pytest.approx(1 / 3)  # ties
    assert ks_statistic([1.0], [1.0]) == 0.0
    assert ks_statistic([0.0, 0.0], [1.0]) == 1.0
    with pytest.raises(ValueError):
        ks_statistic([], [1.0])


def test_kolmogorov_survival_function_known_values() -> None:
    # the classic 5 % and 1 % critical values of the Kolmogorov distribution
    assert kolmogorov_sf(1.3581) == pytest.approx(0.05, abs=1e-4)
    assert kolmogorov_sf(1.6276) == pytest.approx(0.01, abs=1e-4)
    assert kolmogorov_sf(0.0) == 1.0
    assert kolmogorov_sf(0.1) == pytest.approx(1.0)
    # the two series agree where they switch
    low, high = kolmogorov_sf(1.18 - 1e-9), kolmogorov_sf(1.18)
    assert low == pytest.approx(high, abs=1e-9)
    assert ks_p_value(0.0, 10, 10) == 1.0


def test_ks_against_scipy_when_available() -> None:
    stats = pytest.importorskip("scipy.stats")
    for seed in range(5):
        a = beta(2, 5, 40 + seed * 17, seed=seed)
        b = beta(2.5, 4, 55, seed=100 + seed)
        b[:5] = a[:5]  # some ties across the samples
        d = ks_statistic(a, b)
        assert d == pytest.approx(float(stats.ks_2samp(a, b).statistic), abs=1e-12)
        en = len(a) * len(b) / (len(a) + len(b))
        expected = float(stats.kstwobign.sf(math.sqrt(en) * d))
        assert ks_p_value(d, len(a), len(b)) == pytest.approx(expected, rel=1e-9, abs=1e-12)
    for x in (0.2, 0.5, 0.9, 1.1, 1.2, 1.5, 2.5, 4.0):
        assert kolmogorov_sf(x) == pytest.approx(float(stats.kstwobign.sf(x)), rel=1e-9, abs=1e-15)


# -- abstention rate ---------------------------------------------------------------------


def test_two_proportion_z_by_hand() -> None:
    z, p = two_proportion_z(10, 100, 30, 100)  # pooled 0.2, se = sqrt(0.2 · 0.8 · 0.02)
    assert z == pytest.approx(0.2 / math.sqrt(0.0032))
    assert p == pytest.approx(math.erfc(2.5))
    assert p == pytest.approx(0.000407, abs=1e-6)
    assert two_proportion_z(30, 100, 10, 100)[0] == pytest.approx(-z)
    assert two_proportion_z(0, 10, 0, 20) == (0.0, 1.0)
    assert two_proportion_z(5, 10, 10, 20) == (0.0, 1.0)


def test_abstention_rate_is_compared_between_reports() -> None:
    a = [0.9] * 10 + [0.1] * 90
    b = [0.9] * 30 + [0.1] * 70
    drift = distribution_drift(
        report(judged_rows({"abstention": a})), report(judged_rows({"abstention": b}))
    )
    rate = drift.abstention_rate
    assert rate is not None
    assert (rate.n_a, rate.n_b, rate.a, rate.b) == (100, 100, 0.1, 0.3)
    assert rate.p_value == pytest.approx(math.erfc(2.5))
    assert rate.flag == "drift"
    same = distribution_drift(
        report(judged_rows({"abstention": a})), report(judged_rows({"abstention": a}))
    )
    assert same.abstention_rate is not None and same.abstention_rate.flag == "none"


def test_abstention_moderate_flag() -> None:
    # 20/100 vs 34/100: p between 0.01 and 0.05
    a = [0.5] * 20 + [0.0] * 80
    b = [0.5] * 34 + [0.0] * 66
    rate = distribution_drift(
        report(judged_rows({"abstention": a})), report(judged_rows({"abstention": b}))
    ).abstention_rate
    assert rate is not None
    assert 0.01 <= rate.p_value < 0.05
    assert rate.flag == "moderate"


# -- whole reports ---------------------------------------------------------------------------


def golden_report() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((ROOT / "reports" / "expected-report.json").read_text())
    return data


def test_committed_report_against_itself() -> None:
    data = golden_report()
    drift = distribution_drift(data, data)
    names = [q.name for q in drift.quantities]
    assert "contextCount" in names and "retrieval.bestChunk" in names
    assert all(q.psi == 0.0 and q.flag == "none" for q in drift.quantities)
    assert drift.model_changes == [] and drift.pricing_changes == []
    # rows carry queryTokens; the main fixture asks no abstention question
    assert "queryTokens" in names and "generation.abstention" not in names
    assert drift.abstention_rate is None
    assert any(note.startswith("generation.abstention: skipped") for note in drift.notes)


def test_quantity_missing_in_one_report_is_skipped_with_a_note() -> None:
    a = report(
        [
            {**row, "queryTokens": 5 + i}
            for i, row in enumerate(judged_rows({"relevance": [0.5] * 4}))
        ]
    )
    b = report(judged_rows({"relevance": [0.5] * 4}))
    drift = distribution_drift(a, b)
    assert "queryTokens" not in [q.name for q in drift.quantities]
    assert "queryTokens: skipped, missing in report B" in drift.notes
    with_both = distribution_drift(a, a)
    q = next(q for q in with_both.quantities if q.name == "queryTokens")
    assert (q.n_a, q.binning, q.flag) == (4, "quantile", "none")


def test_failed_rows_are_left_out() -> None:
    rows = judged_rows({"relevance": [0.2, 0.4]})
    failed = {"id": "bad", "status": "failed", "retrieval": None, "generation": None}
    drift = distribution_drift(report(rows), report([*rows, failed]))
    counts = {q.name: (q.n_a, q.n_b) for q in drift.quantities}
    assert counts == {
        "contextCount": (2, 2),
        "retrieval.bestChunk": (2, 2),
        "generation.relevance": (2, 2),
    }


def test_context_count_shift_is_flagged() -> None:
    a = judged_rows({"relevance": [0.5] * 50}, contexts=3)
    b = judged_rows({"relevance": [0.5] * 50}, contexts=8)
    drift = distribution_drift(report(a), report(b))
    q = next(q for q in drift.quantities if q.name == "contextCount")
    assert q.flag == "drift" and q.ks == 1.0


def test_model_and_pricing_changes_are_listed_separately() -> None:
    rows = judged_rows({"relevance": [0.5]})
    a = report(rows)
    b = report(rows, provider={"answeredBy": ["jev-2"]}, pricing={"version": "v2"})
    drift = distribution_drift(a, b)
    assert [(c.path, c.before, c.after) for c in drift.model_changes] == [
        ("provider.answeredBy", ["jev-1"], ["jev-2"])
    ]
    assert [c.path for c in drift.pricing_changes] == ["pricing.version"]


def test_row_order_does_not_matter() -> None:
    rng = random.Random(7)
    values = {"groundedness": beta(2, 5, 60, 1), "abstention": beta(1, 3, 60, 2)}
    rows = judged_rows(values)
    shuffled = copy.deepcopy(rows)
    rng.shuffle(shuffled)
    other = report(
        judged_rows({"groundedness": beta(3, 3, 60, 3), "abstention": beta(1, 1, 60, 4)})
    )
    assert distribution_drift(report(rows), other) == distribution_drift(report(shuffled), other)


def test_output_is_camel_case_json() -> None:
    data = golden_report()
    dumped = distribution_drift(data, data).model_dump(mode="json", by_alias=True)
    assert list(dumped) == [
        "metric",
        "thresholds",
        "quantities",
        "abstentionRate",
        "modelChanges",
        "pricingChanges",
        "notes",
    ]
    assert dumped["metric"] == "psi"
    assert dumped["thresholds"]["psiDrift"] == 0.25
    assert {"nA", "nB", "psi", "ks", "ksPValue", "flag"} <= set(dumped["quantities"][0])
    assert DriftReport.model_validate(dumped) == distribution_drift(data, data)


def test_markdown() -> None:
    a = judged_rows({"abstention": [0.9] * 10 + [0.1] * 90})
    b = judged_rows({"abstention": [0.9] * 30 + [0.1] * 70})
    drift = distribution_drift(report(a), report(b, provider={"answeredBy": ["jev-2"]}))
    text = drift_markdown(drift, "main", "pr")
    assert text.startswith("### Distribution drift\n")
    assert text.endswith("\n")
    assert "| Quantity | n main | n pr | PSI | KS D | KS p | Flag |" in text
    assert "| `generation.abstention` | 100 | 100 |" in text
    assert "#### Abstention rate" in text and "| 0.1 | 0.3 |" in text
    assert "| `provider.answeredBy` | jev-1 | jev-2 |" in text
    assert "- queryTokens: skipped, missing in report A and B" in text
    assert "Model release" not in drift_markdown(drift, include_changes=False)
    empty = drift_markdown(distribution_drift(report([]), report([])))
    assert "No quantity present in both reports." in empty
