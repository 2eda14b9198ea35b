"""Per-judgment threshold refinement by coordinate ascent (pure: no I/O).

One coordinate is one judgment's fail or pass threshold. A row's diagnosis as a function of
that threshold changes only where the threshold crosses the row's own answer, so each row
has two outcomes — the threshold catches its answer or not — and prefix sums over the rows
sorted by that answer count every candidate value in one pass.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ragbatch.calibrate._rules import (
    BAND,
    HIGH,
    JUDGMENTS,
    LOW,
    Decide,
    Pair,
    Signals,
    decide,
    statuses,
)
from ragbatch.core import Diagnosis

MAX_ROUNDS = 8


@dataclass(frozen=True, slots=True)
class Sample:
    """One labelled row as the search sees it."""

    signals: Signals
    expected: str


def rank(n: int, k: int, kmax: Sequence[int]) -> tuple[int, int, int]:
    """Order of (automatic rows n, errors k): feasible first, by more rows then fewer errors;
    infeasible ones by fewer errors above the allowance ``kmax[n]``, then more rows."""
    if k <= kmax[n]:
        return (1, n, -k)
    return (0, kmax[n] - k, n)


def counts_over_move(
    samples: Sequence[Sample],
    table: Sequence[list[int]],
    pairs: Mapping[str, Pair],
    name: str,
    side: int,
    values: Sequence[float],
    decide: Decide = decide,
) -> list[tuple[int, int]]:
    """(automatic rows, errors) if judgment ``name``'s fail (side 0) or pass (side 1)
    threshold took each of ``values``, all else as in ``table`` (the rows' statuses).

    Values must keep fail < pass; ``table`` is restored before returning.
    """
    j = JUDGMENTS.index(name)
    fail, pass_ = pairs[name]
    moving: list[tuple[float, int, int, int, int]] = []  # p, caught (auto, wrong), missed
    base_auto = base_wrong = 0
    for s, st in zip(samples, table, strict=True):
        p = s.signals[j]
        if p is None:
            auto, wrong = _score(decide(st), s.expected)
            base_auto, base_wrong = base_auto + auto, base_wrong + wrong
            continue
        # Caught: the threshold takes p (low for the fail side, high for the pass side);
        # missed: it does not, and p falls to the band or to the other side.
        missed = (HIGH if p >= pass_ else BAND) if side == 0 else (LOW if p <= fail else BAND)
        saved = st[j]
        st[j] = LOW if side == 0 else HIGH
        caught_diagnosis = decide(st)
        st[j] = missed
        missed_diagnosis = decide(st)
        st[j] = saved
        moving.append(
            (p, *_score(caught_diagnosis, s.expected), *_score(missed_diagnosis, s.expected))
        )
    moving.sort(key=lambda m: m[0])
    answers = [m[0] for m in moving]
    prefix = [(0, 0, 0, 0)]
    for m in moving:
        last = prefix[-1]
        prefix.append((last[0] + m[1], last[1] + m[2], last[2] + m[3], last[3] + m[4]))
    total = prefix[-1]
    out: list[tuple[int, int]] = []
    for value in values:
        if side == 0:
            i = bisect_right(answers, value)  # the first i rows are caught (p <= value)
            n = prefix[i][0] + total[2] - prefix[i][2]
            k = prefix[i][1] + total[3] - prefix[i][3]
        else:
            i = bisect_left(answers, value)  # the first i rows are missed (p < value)
            n = prefix[i][2] + total[0] - prefix[i][0]
            k = prefix[i][3] + total[1] - prefix[i][1]
        out.append((n + base_auto, k + base_wrong))
    return out


def refine(
    samples: Sequence[Sample],
    thresholds: Mapping[str, Pair],
    names: Sequence[str],
    kmax: Sequence[int],
    options: Mapping[str, Sequence[float]],
    decide: Decide = decide,
) -> dict[str, Pair]:
    """Coordinate ascent over each named judgment's fail and pass threshold in turn.

    ``options`` holds each name's candidate values. A move is taken only if it strictly
    improves :func:`rank` (from an infeasible start the first moves cut the errors above the
    allowance until the constraint holds); rounds repeat until nothing moves. Ties keep the
    smaller fail or the larger pass: the same rows, with narrower automatic regions.
    """
    pairs = dict(thresholds)
    table = [statuses(s.signals, pairs) for s in samples]
    score = rank(*_totals(samples, table, decide), kmax)
    for _ in range(MAX_ROUNDS):
        moved = False
        for name in names:
            for side in (0, 1):
                fail, pass_ = pairs[name]
                if side == 0:
                    values = [v for v in options[name] if v < pass_]
                else:
                    values = [v for v in reversed(options[name]) if v > fail]
                counts = counts_over_move(samples, table, pairs, name, side, values, decide)
                choice = None
                for value, (n, k) in zip(values, counts, strict=True):
                    if rank(n, k, kmax) > score:
                        choice, score = value, rank(n, k, kmax)
                if choice is None:
                    continue
                pair = (choice, pass_) if side == 0 else (fail, choice)
                pairs[name] = pair
                j = JUDGMENTS.index(name)
                for s, st in zip(samples, table, strict=True):
                    p = s.signals[j]
                    if p is not None:
                        st[j] = LOW if p <= pair[0] else HIGH if p >= pair[1] else BAND
                moved = True
        if not moved:
            break
    return pairs


def _score(diagnosis: Diagnosis, expected: str) -> tuple[int, int]:
    """(automatic, automatic and wrong) of one outcome."""
    is_auto = diagnosis != "JUDGE_UNCERTAIN"
    return int(is_auto), int(is_auto and diagnosis != expected)


def _totals(
    samples: Sequence[Sample], table: Sequence[list[int]], decide: Decide = decide
) -> tuple[int, int]:
    auto = wrong = 0
    for s, st in zip(samples, table, strict=True):
        a, w = _score(decide(st), s.expected)
        auto, wrong = auto + a, wrong + w
    return auto, wrong
