"""The candidate ladders fixed before the labels are seen, and their counts (pure: no I/O).

A ladder is one routing's sequence of (fail, pass) pairs from the most to the least
conservative: symmetric pairs (t, 1 - t) for growing t, with an asymmetric step between two
of them that loosens the fail side first, (t_next, 1 - t) — a monotone staircase, so every
step's uncertain band lies inside the previous one's. Nothing in it depends on the data,
which is what lets fixed-sequence testing use *every* labelled row (docs/semantics.md §5).

:func:`tally` counts (automatic rows, errors) per step and per automatic diagnosis in one
pass: along a ladder, a judgment's status changes at most twice (it joins the low side at
the first step whose fail threshold reaches it, the high side likewise), so a row's diagnosis
is re-evaluated only at those breakpoints instead of at every step. A multi-step trace's
answers move the same way, each step's, and its diagnosis is the trace policy's
(:mod:`ragbatch.calibrate._trace_plan`).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass, field

from ragbatch.calibrate._refine import Sample, rule_of, statuses_of
from ragbatch.calibrate._rules import ABSENT, BAND, DECIDE, HIGH, JUDGMENTS, LOW, Pair, in_order

# The t of the symmetric steps; the first ones automate little and are skipped on small
# label sets (see guarantee.reachable), the last ones only matter for loose targets.
STEPS = (
    0.002,
    0.005,
    0.01,
    0.015,
    0.02,
    0.025,
    0.03,
    0.035,
    0.04,
    0.045,
    0.05,
    0.06,
    0.07,
    0.08,
    0.09,
    0.1,
    0.11,
    0.12,
    0.13,
    0.15,
    0.17,
    0.2,
    0.25,
    0.3,
    0.35,
    0.4,
    0.45,
)


@dataclass(frozen=True, slots=True)
class Count:
    """One step's counts: automatic rows, wrong ones, and both per automatic diagnosis."""

    auto: int = 0
    errors: int = 0
    by_diagnosis: dict[str, tuple[int, int]] = field(default_factory=dict)


def pairs(steps: Sequence[float] | None = None) -> list[Pair]:
    """The staircase over ``steps`` (default ``STEPS``): (t_i, 1 - t_i), (t_i+1, 1 - t_i), …"""
    ts = sorted({min(t, 1.0 - t) for t in (STEPS if steps is None else steps)} - {0.5})
    out: list[Pair] = []
    for i, t in enumerate(ts):
        out.append((t, 1.0 - t))
        if i + 1 < len(ts):
            out.append((ts[i + 1], 1.0 - t))
    return out


def tally(samples: Sequence[Sample], ladder: Sequence[Pair], routing: str) -> list[Count]:
    """Counts of every step of ``ladder`` (fails rising, passes falling) under ``routing``."""
    fails = [f for f, _ in ladder]
    minus_passes = [-p for _, p in ladder]  # rising, for bisect
    size = len(ladder)
    decide = DECIDE[routing]
    auto = [0] * (size + 1)
    wrong = [0] * (size + 1)
    per: dict[str, list[list[int]]] = {}
    for s in samples:
        rule = rule_of(s, decide)
        # Step from which each answer is low / high (size: never).
        low_from = [size if p is None else bisect_left(fails, p) for p in s.signals]
        high_from = [size if p is None else bisect_left(minus_passes, -p) for p in s.signals]
        cuts = sorted({0, *low_from, *high_from} - {size})
        for i, start in enumerate(cuts):
            end = cuts[i + 1] if i + 1 < len(cuts) else size
            st = [
                ABSENT if p is None else LOW if start >= lo else HIGH if start >= hi else BAND
                for p, lo, hi in zip(s.signals, low_from, high_from, strict=True)
            ]
            diagnosis = rule(st)
            if diagnosis == "JUDGE_UNCERTAIN":
                continue
            bad = int(diagnosis != s.expected)
            auto[start] += 1
            auto[end] -= 1
            wrong[start] += bad
            wrong[end] -= bad
            rows = per.setdefault(diagnosis, [[0] * (size + 1), [0] * (size + 1)])
            rows[0][start] += 1
            rows[0][end] -= 1
            rows[1][start] += bad
            rows[1][end] -= bad
    out: list[Count] = []
    n = k = 0
    running = {d: [0, 0] for d in per}
    for step in range(size):
        n, k = n + auto[step], k + wrong[step]
        for d, (a, w) in per.items():
            running[d][0] += a[step]
            running[d][1] += w[step]
        out.append(Count(n, k, {d: (a, w) for d, (a, w) in sorted(running.items()) if a}))
    return out


def thresholds(pair: Pair) -> dict[str, Pair]:
    """The pair for every judgment."""
    return dict.fromkeys(JUDGMENTS, pair)


def count_one(samples: Sequence[Sample], pairs_: dict[str, Pair], routing: str) -> Count:
    """:class:`Count` of one policy (any per-judgment thresholds) on ``samples``."""
    decide = DECIDE[routing]
    ordered = in_order(pairs_)
    n = k = 0
    per: dict[str, list[int]] = {}
    for s in samples:
        diagnosis = rule_of(s, decide)(statuses_of(s, ordered))
        if diagnosis == "JUDGE_UNCERTAIN":
            continue
        bad = int(diagnosis != s.expected)
        n, k = n + 1, k + bad
        row = per.setdefault(diagnosis, [0, 0])
        row[0] += 1
        row[1] += bad
    return Count(n, k, {d: (a, w) for d, (a, w) in sorted(per.items())})
