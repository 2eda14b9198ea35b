"""Per-judgment threshold refinement by coordinate ascent (pure: no I/O).

One coordinate is one judgment's fail or pass threshold. A row's diagnosis as a function of
that threshold changes only where the threshold crosses the row's own answer, so each row
has two outcomes — the threshold catches its answer or not — and prefix sums over the rows
sorted by that answer count every candidate value in one pass. A multi-step trace has one
answer of the judgment per step that asks it, so its outcome changes at each of them: its
few outcomes go into difference arrays over the candidate values instead.
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
    in_order,
    statuses_in_order,
)
from ragbatch.calibrate._trace_plan import TracePlan
from ragbatch.core import Diagnosis

MAX_ROUNDS = 8


@dataclass(frozen=True, slots=True)
class Sample:
    """One labelled row, or multi-step trace (``trace``: its plan), as the search sees it."""

    signals: Signals
    expected: str
    trace: TracePlan | None = None


def statuses_of(s: Sample, pairs: Sequence[Pair]) -> list[int]:
    """The status of each answer of ``s`` under ``pairs`` (in ``JUDGMENTS`` order)."""
    if s.trace is None:
        return statuses_in_order(s.signals, pairs)
    return statuses_in_order(s.signals, [pairs[j] for j in s.trace.slots])


def rule_of(s: Sample, decide: Decide) -> Decide:
    """The rule that diagnoses ``s`` in the routing whose row rule is ``decide``."""
    return decide if s.trace is None else s.trace.rule(decide)


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
    traces = _TraceMoves(values, side)
    base_auto = base_wrong = 0
    for s, st in zip(samples, table, strict=True):
        if s.trace is not None:
            if s.trace.at[j]:
                traces.add(s, st, j, (fail, pass_), decide)
            else:
                auto, wrong = _score(s.trace.rule(decide)(st), s.expected)
                base_auto, base_wrong = base_auto + auto, base_wrong + wrong
            continue
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
    for value, (trace_auto, trace_wrong) in zip(values, traces.counts(), strict=True):
        if side == 0:
            i = bisect_right(answers, value)  # the first i rows are caught (p <= value)
            n = prefix[i][0] + total[2] - prefix[i][2]
            k = prefix[i][1] + total[3] - prefix[i][3]
        else:
            i = bisect_left(answers, value)  # the first i rows are missed (p < value)
            n = prefix[i][2] + total[0] - prefix[i][0]
            k = prefix[i][3] + total[1] - prefix[i][1]
        out.append((n + base_auto + trace_auto, k + base_wrong + trace_wrong))
    return out


class _TraceMoves:
    """The traces' part of :func:`counts_over_move`: per trace, its outcome between each two
    of its distinct answers of the moving judgment, added to difference arrays over the
    candidate values (sorted ascending)."""

    def __init__(self, values: Sequence[float], side: int) -> None:
        self.side = side
        self.order = sorted(range(len(values)), key=values.__getitem__)
        self.ascending = [values[i] for i in self.order]
        self.auto = [0] * (len(values) + 1)
        self.wrong = [0] * (len(values) + 1)

    def add(self, s: Sample, st: list[int], j: int, pair: Pair, decide: Decide) -> None:
        assert s.trace is not None
        rule, values = s.trace.rule(decide), s.trace.values
        positions, distinct = s.trace.at[j], s.trace.distinct[j]
        saved = [st[i] for i in positions]
        side, ascending = self.side, self.ascending
        # Cut c: the c smallest distinct answers are caught (fail side: p <= value) or
        # missed (pass side: p < value); the values in [start, end) of ``ascending`` give it.
        find = bisect_left if side == 0 else bisect_right
        for i in positions:  # cut 0: nothing caught (fail side) / nothing missed (pass side)
            st[i] = (HIGH if values[i] >= pair[1] else BAND) if side == 0 else HIGH
        moved = 0
        for cut in range(len(distinct) + 1):
            while cut and moved < len(positions) and values[positions[moved]] == distinct[cut - 1]:
                i = positions[moved]
                st[i] = LOW if side == 0 or values[i] <= pair[0] else BAND
                moved += 1
            auto, wrong = _score(rule(st), s.expected)
            start = find(ascending, distinct[cut - 1]) if cut else 0
            end = find(ascending, distinct[cut]) if cut < len(distinct) else len(ascending)
            self.auto[start] += auto
            self.auto[end] -= auto
            self.wrong[start] += wrong
            self.wrong[end] -= wrong
        for i, value in zip(positions, saved, strict=True):
            st[i] = value

    def counts(self) -> list[tuple[int, int]]:
        """(automatic traces, wrong ones) per value, in the order the values were given."""
        out = [(0, 0)] * len(self.order)
        n = k = 0
        for rank, index in enumerate(self.order):
            n, k = n + self.auto[rank], k + self.wrong[rank]
            out[index] = (n, k)
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
    table = [statuses_of(s, in_order(pairs)) for s in samples]
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
                    for i in (j,) if s.trace is None else s.trace.at[j]:
                        p = s.signals[i]
                        if p is not None:
                            st[i] = LOW if p <= pair[0] else HIGH if p >= pair[1] else BAND
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
        a, w = _score(decide(st) if s.trace is None else s.trace.rule(decide)(st), s.expected)
        auto, wrong = auto + a, wrong + w
    return auto, wrong
