"""Threshold search: a global (fail, pass) grid, then per-judgment refinement (pure: no I/O).

Objective: the number of automatic rows (coverage); constraint: the errors among them stay
within ``kmax[n]``, the most errors n automatic rows may hold for the Clopper-Pearson bound
to meet the target (see :func:`ragbatch.calibrate._bounds.max_errors`).

The global search counts every candidate in one pass over the rows instead of re-diagnosing
each row per pair: for a fixed fail threshold F, a row's diagnosis as a function of the pass
threshold P changes only where P crosses its conflict, its contradiction, or the smallest of
its answers above F (where the uncertain band starts to catch it), so each row adds at most
four intervals of P to difference arrays (a multi-step trace: one interval between each two
of its answers above F, each diagnosed by the trace policy). Refinement:
:mod:`ragbatch.calibrate._refine`.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ragbatch.calibrate._refine import Sample, rank, refine, statuses_of
from ragbatch.calibrate._rules import (
    BAND,
    CHUNK,
    CONFLICT,
    CONTRADICTION,
    CORRECTNESS,
    DECIDE,
    GROUNDED,
    HIGH,
    JUDGMENTS,
    LOW,
    RELEVANCE,
    SUFFICIENCY,
    Decide,
    Pair,
    Signals,
    decide,
    in_order,
    statuses_in_order,
)
from ragbatch.core import Diagnosis

__all__ = ["Fitted", "GlobalResult", "Sample", "count", "fit", "search_global", "search_grid"]

MAX_CANDIDATES = 40
GRID_CANDIDATES = 12  # per side for the direct grid of the guarded routing
MIN_ROWS_PER_JUDGMENT = 30
_INF = float("inf")


@dataclass(frozen=True, slots=True)
class GlobalResult:
    """The best feasible global pair (None if none) and, per n, the fewest errors seen."""

    best: tuple[float, float, int, int] | None  # fail, pass, automatic rows, errors
    min_errors: list[int]


@dataclass(frozen=True, slots=True)
class Fitted:
    """Per-judgment thresholds found on one training set."""

    fail: float
    pass_: float
    thresholds: dict[str, Pair]
    refined: tuple[str, ...]


def answers_of(s: Sample, j: int) -> list[float]:
    """The answers of judgment ``j`` in ``s``: a row's one (if asked), a trace's per step."""
    if s.trace is None:
        p = s.signals[j]
        return [] if p is None else [p]
    return [s.trace.values[i] for i in s.trace.at[j]]


def thin(values: Sequence[float], limit: int = MAX_CANDIDATES) -> list[float]:
    """The distinct values, or ``limit`` quantiles of them (by occurrence) when there are more."""
    ordered = sorted(values)
    distinct = sorted(set(ordered))
    if len(distinct) <= limit:
        return distinct
    last = len(ordered) - 1
    return sorted({ordered[round(i * last / (limit - 1))] for i in range(limit)})


def candidates(values: Sequence[float], grid: Sequence[float] | None) -> list[float]:
    """Threshold candidates: the grid, or the thinned values, plus the extremes 0 and 1."""
    base = list(grid) if grid is not None else thin(values)
    return sorted({0.0, 1.0, *base})


def count(
    samples: Sequence[Sample], thresholds: Mapping[str, Pair], decide: Decide = decide
) -> tuple[int, int]:
    """(automatic rows, wrong automatic rows) under the thresholds."""
    auto = errors = 0
    pairs = in_order(thresholds)
    for s in samples:
        if s.trace is None:
            diagnosis = decide(statuses_in_order(s.signals, pairs))
        else:
            diagnosis = s.trace.rule(decide)(statuses_of(s, pairs))
        if diagnosis != "JUDGE_UNCERTAIN":
            auto += 1
            errors += diagnosis != s.expected
    return auto, errors


def pass_segments(sig: Signals, fail: float) -> list[tuple[float, Diagnosis]]:
    """The diagnosis of one row for every pass threshold P > ``fail``, as (upper end, diagnosis).

    Segment i covers ``previous upper end < P <= upper end`` (the first starts at ``fail``).
    """
    c, d = sig[CONFLICT], sig[CONTRADICTION]
    assert c is not None and d is not None  # signals_of guarantees them
    out: list[tuple[float, Diagnosis]] = []

    def add(upper: float, diagnosis: Diagnosis) -> None:
        if upper > (out[-1][0] if out else fail):
            out.append((upper, diagnosis))

    add(c, "CONFLICTING_EVIDENCE")  # conflict >= P
    chunk = sig[CHUNK]
    fixed: Diagnosis | None = None
    if chunk is None or chunk <= fail:
        fixed = "RETRIEVAL_MISS"
    elif _at_most(sig[SUFFICIENCY], fail):
        fixed = "RETRIEVAL_INSUFFICIENT"
    elif _at_most(sig[RELEVANCE], fail):
        fixed = "ANSWER_IRRELEVANT"
    elif _at_most(sig[GROUNDED], fail):
        fixed = "GENERATOR_UNGROUNDED"
    if fixed is not None:
        add(_INF, fixed)
        return out
    add(d, "GENERATOR_UNGROUNDED")  # contradiction >= P
    if _at_most(sig[CORRECTNESS], fail):
        add(_INF, "ANSWER_INCORRECT")
        return out
    # Uncertain as soon as some answer lies strictly between fail and P.
    above = [p for p in sig if p is not None and p > fail]
    add(min(above, default=_INF), "PASS")
    add(_INF, "JUDGE_UNCERTAIN")
    return out


def trace_segments(s: Sample, fail: float) -> list[tuple[float, Diagnosis]]:
    """:func:`pass_segments` of a multi-step trace: an answer above ``fail`` is high while
    P <= the answer and in the band beyond, so its showcase diagnosis changes only there."""
    assert s.trace is not None
    rule, order, ordered = s.trace.rule(decide), s.trace.order, s.trace.ascending
    st = [LOW if p <= fail else HIGH for p in s.trace.values]
    k = bisect_right(ordered, fail)
    out: list[tuple[float, Diagnosis]] = []
    for upper in [*sorted(set(ordered[k:])), _INF]:
        while k < len(order) and ordered[k] < upper:  # fail < p < P: in the band
            st[order[k]] = BAND
            k += 1
        diagnosis = rule(st)
        if out and out[-1][1] == diagnosis:
            out[-1] = (upper, diagnosis)  # the same diagnosis on both sides: one segment
        else:
            out.append((upper, diagnosis))
    return out


def _at_most(p: float | None, fail: float) -> bool:
    return p is not None and p <= fail


def counts_over_pass(
    samples: Sequence[Sample], fail: float, passes: Sequence[float]
) -> list[tuple[int, int]]:
    """(automatic rows, errors) for each pass threshold of ``passes`` (sorted, all > fail)."""
    size = len(passes)
    auto = [0] * (size + 1)
    wrong = [0] * (size + 1)
    for s in samples:
        lower = fail
        segments = pass_segments(s.signals, fail) if s.trace is None else trace_segments(s, fail)
        for upper, diagnosis in segments:
            i = bisect_right(passes, lower)  # candidates with lower < P <= upper
            j = bisect_right(passes, upper)
            if diagnosis != "JUDGE_UNCERTAIN" and i < j:
                bad = diagnosis != s.expected
                auto[i] += 1
                auto[j] -= 1
                wrong[i] += bad
                wrong[j] -= bad
            lower = upper
    out: list[tuple[int, int]] = []
    n = k = 0
    for index in range(size):
        n += auto[index]
        k += wrong[index]
        out.append((n, k))
    return out


def search_global(
    samples: Sequence[Sample], fails: Sequence[float], passes: Sequence[float], kmax: Sequence[int]
) -> GlobalResult:
    """Every (fail, pass) pair of the grids with fail < pass; the feasible one with most rows.

    Ties keep the smallest fail and then the largest pass: the same rows are automatic, and
    the narrowest automatic regions are the safer bet on unseen rows.
    """
    passes = sorted(passes)
    min_errors = [-1] * (len(samples) + 1)
    best: tuple[float, float, int, int] | None = None
    for fail in sorted(fails):
        above = passes[bisect_right(passes, fail) :]
        for pass_, (n, k) in zip(above, counts_over_pass(samples, fail, above), strict=True):
            if min_errors[n] < 0 or k < min_errors[n]:
                min_errors[n] = k
            if k > kmax[n]:
                continue
            if best is None or (n, -k) > (best[2], -best[3]):
                best = (fail, pass_, n, k)
            elif (n, k, fail) == (best[2], best[3], best[0]):
                best = (fail, pass_, n, k)  # same rows: prefer the larger pass
    return GlobalResult(best=best, min_errors=min_errors)


def search_grid(
    samples: Sequence[Sample],
    fails: Sequence[float],
    passes: Sequence[float],
    kmax: Sequence[int],
    decide: Decide,
) -> GlobalResult:
    """Like :func:`search_global`, by evaluating every pair directly (any routing)."""
    min_errors = [-1] * (len(samples) + 1)
    best: tuple[float, float, int, int] | None = None
    for fail in sorted(fails):
        for pass_ in sorted(p for p in passes if p > fail):
            n, k = count(samples, dict.fromkeys(JUDGMENTS, (fail, pass_)), decide)
            if min_errors[n] < 0 or k < min_errors[n]:
                min_errors[n] = k
            if k > kmax[n]:
                continue
            # ties: the smallest fail (seen first), then the largest pass (seen last)
            same = best is not None and (n, k, fail) == (best[2], best[3], best[0])
            if best is None or (n, -k) > (best[2], -best[3]) or same:
                best = (fail, pass_, n, k)
    return GlobalResult(best=best, min_errors=min_errors)


def fit(
    samples: Sequence[Sample],
    kmax: Sequence[int],
    grid: Sequence[float] | None,
    routing: str = "showcase",
) -> tuple[Fitted | None, GlobalResult]:
    """Global pair, then per-judgment refinement where a judgment has enough rows.

    The refinement runs from the best global pair (when one is feasible) and from the
    corner (fail 0, pass 1: only answers of exactly 0 or 1 are confident, so single
    judgments earn automation one at a time); the better result wins. Returns None (with the
    global search's record, refined results included) when nothing meets the constraint.
    """
    pooled = [p for s in samples for p in s.signals if p is not None]
    rule = DECIDE[routing]
    if routing == "showcase":
        options = candidates(pooled, grid)
        result = search_global(samples, options[:-1], options[1:], kmax)
    else:
        options = sorted({0.0, 1.0, *(grid if grid is not None else thin(pooled, GRID_CANDIDATES))})
        result = search_grid(samples, options[:-1], options[1:], kmax, rule)
    names = tuple(
        name
        for j, name in enumerate(JUDGMENTS)
        if sum(bool(answers_of(s, j)) for s in samples) >= MIN_ROWS_PER_JUDGMENT
    )
    per_name = {
        n: candidates([p for s in samples for p in answers_of(s, JUDGMENTS.index(n))], grid)
        for n in names
    }
    starts = [(0.0, 1.0)]
    if result.best is not None:
        starts.insert(0, (result.best[0], result.best[1]))
    best: tuple[tuple[int, int, int], Fitted] | None = None
    for fail, pass_ in starts:
        start = dict.fromkeys(JUDGMENTS, (fail, pass_))
        pairs = refine(samples, start, names, kmax, per_name, rule)
        n, k = count(samples, pairs, rule)
        if result.min_errors[n] < 0 or k < result.min_errors[n]:
            result.min_errors[n] = k  # a refusal reports the best bound seen anywhere
        score = rank(n, k, kmax)
        if best is None or score > best[0]:
            best = (score, Fitted(fail=fail, pass_=pass_, thresholds=pairs, refined=names))
    assert best is not None
    return (best[1] if best[0][0] == 1 else None), result
