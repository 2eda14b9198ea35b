"""Clopper-Pearson bounds and AUROC for threshold calibration (pure: no I/O).

The one-sided upper bound of an error rate with ``k`` errors in ``n`` rows at confidence
``c`` is the ``c`` quantile of Beta(k + 1, n - k) (1 when k = n or n = 0). It is computed
here in pure Python — the regularized incomplete beta by its continued fraction (Lentz),
inverted by bisection — so scipy is not a runtime dependency; the tests compare it with
``scipy.stats.beta`` when scipy is installed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

_EPS = 1e-15
_TINY = 1e-300
_MAX_TERMS = 100_000


def _continued_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of I_x(a, b), converging fast for x < (a + 1) / (a + b + 2)."""
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c = 1.0
    d = 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    h = d
    for m in range(1, _MAX_TERMS):
        m2 = 2 * m
        for aa in (
            m * (b - m) * x / ((qam + m2) * (a + m2)),
            -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2)),
        ):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > _TINY else _TINY)
            c = 1.0 + aa / c
            c = c if abs(c) > _TINY else _TINY
            delta = d * c
            h *= delta
        if abs(delta - 1.0) < _EPS:
            return h
    raise ArithmeticError(f"incomplete beta did not converge for a={a} b={b} x={x}")  # a bug


def betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b) for a, b > 0."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _continued_fraction(a, b, x) / a
    return 1.0 - math.exp(log_front) * _continued_fraction(b, a, 1.0 - x) / b


def upper_bound(errors: int, n: int, confidence: float) -> float:
    """One-sided Clopper-Pearson upper bound of an error rate at ``confidence``."""
    if n <= 0 or errors >= n:
        return 1.0
    a, b = errors + 1.0, float(n - errors)
    lo, hi = errors / n, 1.0
    while True:
        mid = (lo + hi) / 2.0
        if not lo < mid < hi:  # adjacent floats: as exact as a double gets
            return hi
        if betainc(a, b, mid) >= confidence:
            hi = mid
        else:
            lo = mid


def is_within(errors: int, n: int, target: float, confidence: float) -> bool:
    """Whether the upper bound of ``errors`` in ``n`` is at most ``target`` (no bisection)."""
    return n > 0 and errors < n and betainc(errors + 1.0, float(n - errors), target) >= confidence


def max_errors(n_max: int, target: float, confidence: float) -> list[int]:
    """Entry n: the most errors among n rows whose upper bound stays within the target (-1: none).

    Non-decreasing in n, so the table is built in one pass with about 2·n_max evaluations.
    """
    table: list[int] = []
    k = -1
    for n in range(n_max + 1):
        while k + 1 < n and is_within(k + 1, n, target, confidence):
            k += 1
        table.append(k)
    return table


def best_bound(min_errors: Sequence[int], confidence: float) -> tuple[float, int, int]:
    """The lowest upper bound over (n, fewest errors seen with n automatic rows) points.

    ``min_errors[n]`` is the fewest errors any candidate had with exactly n automatic rows
    (negative: no candidate had n). Returns (bound, n, errors); only the Pareto front (more
    rows with fewer errors) is bounded, since anything else is dominated.
    """
    best = (1.0, 0, 0)
    fewest = None
    for n in range(len(min_errors) - 1, 0, -1):
        k = min_errors[n]
        if k < 0 or (fewest is not None and k >= fewest):
            continue
        fewest = k
        bound = upper_bound(k, n, confidence)
        if bound < best[0]:
            best = (bound, n, k)
    return best


def auroc(scores: Sequence[float], positives: Sequence[bool]) -> float | None:
    """Area under the ROC curve of ``scores`` for ``positives`` (ties count one half).

    None when either class is empty (the area is undefined).
    """
    n_pos = sum(positives)
    n_neg = len(positives) - n_pos
    if n_pos == 0 or n_neg == 0:
        return None
    order = sorted(range(len(scores)), key=lambda i: scores[i])
    rank_sum = 0.0
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and scores[order[j + 1]] == scores[order[i]]:
            j += 1
        mean_rank = (i + j) / 2.0 + 1.0  # ties share the average of their 1-based ranks
        rank_sum += mean_rank * sum(positives[order[t]] for t in range(i, j + 1))
        i = j + 1
    return (rank_sum - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg)
