"""Prediction-powered inference of a rate from many judge verdicts and a few human labels (pure).

The rate estimated is the share of the report's rows whose true (human) label is 1, for one
target (a diagnosis, "any failure", a judgment). The judge gave a verdict ``f`` on every row;
people labelled a sample drawn stratified by the judge's (diagnosis, route) with known
inclusion probabilities (``audit-sample``). The PPI++ estimator (Angelopoulos, Duchi and
Zrnic, *PPI++*, 2023) is

    estimate = lambda * judge_rate + sum_h W_h * (mean_h(y) - lambda * mean_h(f))

with ``W_h`` the stratum's share of the rows and the second term the rectifier: the judge's
bias measured on the labels of each stratum. Any ``lambda`` gives an unbiased estimate; the
power-tuned one minimises the estimated variance, and ``lambda = 0`` (labels alone) is among
the candidates; when the labels' own variance estimate is still the smaller (tiny strata pay
for their pseudo-labels, below), the labels-only figure is given, so the interval is never
wider than the labels' own.

Variance: the stratified-sampling formula with the finite-population correction ``1 -
inclusion`` (the target is the report's rows, all of them judged). A stratum without a label for the target leaves its
rows unrepresented, so then the strata are pooled into one group weighted by ``1 /
inclusion``. Each group's variance is estimated with two pseudo-labels (one 1, one 0, at the
group's mean verdict) so that a stratum whose few labels all agree does not claim zero
variance; this is the Agresti-Coull idea and costs a little width on tiny samples.

"Labels only" is the same labelled rows weighted by ``1 / inclusion`` with an unstratified
variance: neither the judge's verdicts on the other rows nor the strata they define.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import NamedTuple

from ragbatch.core import ConfigError
from ragbatch.metrics._scores import Out

PSEUDO = (1.0, 0.0)  # the pseudo-labels added to each group's variance estimate


class Labelled(NamedTuple):
    """One labelled row: its stratum, the human's label, the judge's verdict, 1 / inclusion."""

    stratum: str
    y: float
    f: float
    weight: float


class Population(NamedTuple):
    """One stratum of the report's rows: how many, and the sum of the judge's verdicts."""

    rows: int
    judged: float


class Interval(Out):
    estimate: float
    low: float
    high: float


class Estimate(Out):
    """One rate: judge's raw rate, corrected estimate and interval, labels-only interval.

    ``target``, ``mode`` and ``slice`` say what the rate is of (set by the caller)."""

    target: str = ""
    mode: str = ""
    slice: dict[str, str] | None = None
    judge_rate: float
    estimate: float
    low: float
    high: float
    labels: int
    labels_only: Interval
    rows: int  # the rows the rate is over (the report's successful rows with a verdict)
    standard_error: float
    effective_labels: float  # labels alone would need this many for the same variance
    judge_weight: float  # the power-tuning lambda on the judge (0: labels alone)
    # False: not the stratified PPI++ figure (a stratum had no label, so the strata were
    # pooled; or the labels alone gave the smaller variance and their figure is given)
    stratified: bool
    more_labels: int | None = None  # to reach the target half-width (None: none asked)


@dataclass(frozen=True)
class _Moments:
    """Variance matrix (y, f) of one group's weighted mean, and the group's share."""

    share: float
    yy: float
    yf: float
    ff: float
    y_mean: float
    f_mean: float


def _moments(items: Sequence[Labelled], rows: int, total: int) -> _Moments:
    """A group's Hajek means and the variance of those means: with-replacement
    linearisation, each label's finite-population correction ``1 - inclusion`` (so a slice
    whose rows all happen to be labelled still has the sampling's variance), pseudo-labels
    at the mean weight for the variance only."""
    y_mean = math.fsum(i.weight * i.y for i in items) / math.fsum(i.weight for i in items)
    f_mean = math.fsum(i.weight * i.f for i in items) / math.fsum(i.weight for i in items)
    pad = math.fsum(i.weight for i in items) / len(items)
    padded = [*items, *(Labelled("", y, f_mean, pad) for y in PSEUDO)]
    n = len(padded)
    sw = math.fsum(i.weight for i in padded)
    ym = math.fsum(i.weight * i.y for i in padded) / sw
    fm = math.fsum(i.weight * i.f for i in padded) / sw
    scale = n / (n - 1) / (sw * sw)

    def cov(a: Sequence[float], b: Sequence[float]) -> float:
        return scale * math.fsum(
            i.weight**2 * max(0.0, 1.0 - 1.0 / i.weight) * x * z
            for i, x, z in zip(padded, a, b, strict=True)
        )

    dy = [i.y - ym for i in padded]
    df = [i.f - fm for i in padded]
    return _Moments(rows / total, cov(dy, dy), cov(dy, df), cov(df, df), y_mean, f_mean)


def _interval(estimate: float, variance: float, z: float) -> tuple[float, float]:
    half = z * math.sqrt(max(variance, 0.0))
    return max(0.0, estimate - half), min(1.0, estimate + half)


def labels_needed(labels: int, rows: int, variance: float, half_width: float, z: float) -> int:
    """Labels that bring the half-width to ``half_width``, from the per-label variance seen.

    ``variance`` is the estimate's variance with ``labels`` labels out of ``rows``; under the
    finite-population correction V(n) = S2 * (1/n - 1/rows). Never more than ``rows``.
    """
    if labels >= rows or variance <= 0.0:
        return labels
    s2 = variance / (1.0 / labels - 1.0 / rows)
    need = 1.0 / ((half_width / z) ** 2 / s2 + 1.0 / rows)
    return min(rows, max(labels, math.ceil(need - 1e-9)))


def ppi_rate(
    population: Mapping[str, Population],
    labelled: Sequence[Labelled],
    confidence: float = 0.95,
    target_width: float | None = None,
) -> Estimate | None:
    """The PPI++ estimate of the rate over ``population`` (see the module docstring).

    ``labelled`` rows must belong to strata of ``population``; None when nothing is labelled.
    ``target_width`` (a half-width) asks how many labels in all would reach it.
    """
    if not 0.0 < confidence < 1.0:
        raise ConfigError(f"--confidence must lie in (0, 1), got {confidence}")
    total = sum(p.rows for p in population.values())
    if not labelled or total == 0:
        return None
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    judge_rate = math.fsum(p.judged for p in population.values()) / total
    by: dict[str, list[Labelled]] = {key: [] for key in population if population[key].rows}
    for item in labelled:
        by[item.stratum].append(item)
    stratified = all(by.values())
    groups = (
        [(_moments(v, population[k].rows, total), population[k]) for k, v in by.items()]
        if stratified
        else [(_moments(labelled, total, total), Population(total, judge_rate * total))]
    )
    a = math.fsum(g.share**2 * g.yf for g, _ in groups)
    b = math.fsum(g.share**2 * g.ff for g, _ in groups)
    lam = min(1.0, max(0.0, a / b)) if b > 0.0 else 0.0
    rectified = math.fsum(g.share * (g.y_mean - lam * g.f_mean) for g, _ in groups)
    estimate = min(1.0, max(0.0, lam * judge_rate + rectified))
    variance = math.fsum(g.share**2 * (g.yy - 2 * lam * g.yf + lam**2 * g.ff) for g, _ in groups)
    only = _moments(labelled, total, total)
    if only.yy < variance:  # the labels alone are tighter: PPI++ never does worse than them
        estimate, variance, lam, stratified = only.y_mean, only.yy, 0.0, False
    low, high = _interval(estimate, variance, z)
    only_low, only_high = _interval(only.y_mean, only.yy, z)
    n = len(labelled)
    return Estimate(
        judge_rate=judge_rate,
        estimate=estimate,
        low=low,
        high=high,
        labels=n,
        rows=total,
        standard_error=math.sqrt(max(variance, 0.0)),
        labels_only=Interval(estimate=only.y_mean, low=only_low, high=only_high),
        effective_labels=n * only.yy / variance if variance > 0.0 else float(n),
        judge_weight=lam,
        stratified=stratified,
        more_labels=None
        if target_width is None
        else labels_needed(n, total, variance, target_width, z) - n,
    )


class Inference(Out):
    """The report's ``inference`` section: corrected rates from human labels (versioned)."""

    version: str = "1"
    confidence: float
    target_width: float | None = None
    sample: str  # "stratified" (inclusion probabilities recorded) or "uniform" (assumed)
    labelled_rows: int
    method: str
    estimates: list[Estimate]
    more_labels: int | None = None  # the most any figure needs to reach target_width
