"""What a refused calibration can still offer: the target these labels certify, and the
labels the requested target needs (pure).

Both figures are read off the same ladders and alpha shares the certificate uses
(:mod:`ragbatch.calibrate._guarantee`). They are advice, not guarantees: a target picked
after seeing which one passes is no longer chosen in advance, so a new guarantee needs a
target fixed before the next labelled run.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace

from ragbatch.calibrate._guarantee import (
    LEARN_MIN_ROWS,
    Candidate,
    graphical,
    ladder_shares,
    ladders,
)
from ragbatch.calibrate._ladder import Count
from ragbatch.calibrate._search import Sample

MAX_LABELS = 1_000_000
TARGET_STEP = 0.005  # the smallest certifiable target is searched on this grid


def smallest_target(
    chains: Mapping[str, Sequence[Candidate]],
    shares: Mapping[str, float],
    start: float,
    per_diagnosis: Mapping[str, float] | None,
) -> float | None:
    """The smallest target on the ``TARGET_STEP`` grid above ``start`` that the ladders
    certify (None: not even 50 %)."""
    step = 1
    while (target := round(start + step * TARGET_STEP, 6)) <= 0.5:
        if any(c.certified for c in graphical(chains, shares, target, per_diagnosis)):
            return target
        step += 1
    return None


def projected(
    chains: Mapping[str, Sequence[Candidate]], rows: int, labels: int
) -> dict[str, list[Candidate]]:
    """The ladders as ``labels`` labelled rows would count them at the observed coverage and
    error rates (errors rounded up, per diagnosis too)."""
    scale = labels / rows

    def grow(auto: int, errors: int) -> tuple[int, int]:
        new = round(auto * scale)
        return new, min(new, math.ceil(errors * new / auto)) if auto else 0

    out: dict[str, list[Candidate]] = {}
    for name, chain in chains.items():
        out[name] = []
        for c in chain:
            n, k = grow(c.count.auto, c.count.errors)
            per = {d: grow(a, w) for d, (a, w) in c.count.by_diagnosis.items()}
            out[name].append(replace(c, rows=labels, count=Count(n, k, per)))
    return out


def labels_needed(
    chains: Mapping[str, Sequence[Candidate]],
    shares: Mapping[str, float],
    rows: int,
    target: float,
    per_diagnosis: Mapping[str, float] | None,
) -> int | None:
    """About how many labelled rows the same procedure needs to certify ``target`` if the
    observed coverage and error rates held (None: not within ``MAX_LABELS``)."""

    def passes(labels: int) -> bool:
        tested = graphical(projected(chains, rows, labels), shares, target, per_diagnosis)
        return any(c.certified for c in tested)

    high = rows * 2
    while not passes(high):
        if high >= MAX_LABELS:
            return None
        high *= 2
    low = rows
    while high - low > max(1, high // 50):
        mid = (low + high) // 2
        low, high = (low, mid) if passes(mid) else (mid, high)
    return round(high, -2) if high >= 1000 else high


def refusal(
    samples: Sequence[Sample],
    target: float,
    confidence: float,
    routings: Sequence[str],
    grid: Sequence[float] | None,
    per_diagnosis: Mapping[str, float] | None,
    tie: str,
) -> str:
    """Why nothing was certified, what these labels can certify instead, and what to do."""
    rows = len(samples)
    chains = ladders(samples, routings, grid)
    shares = ladder_shares(routings, 1.0 - confidence, rows >= LEARN_MIN_ROWS)
    tested = graphical(chains, shares, target, per_diagnosis)
    what = (
        f"no thresholds meet target risk {target} at confidence {confidence} on {rows:,} "
        "labelled rows (ladders fixed in advance, tested on every labelled row)"
    )
    first = ""
    if tested:
        c = tested[0]
        first = (
            f"; the first step tested ({c.routing}, fail {c.fitted.fail:g} / pass "
            f"{c.fitted.pass_:g}) had {c.count.errors} wrong of {c.count.auto} automatic rows"
        )
    else:
        first = "; no step automates enough rows to pass even with zero errors"
    smallest = smallest_target(chains, shares, target, per_diagnosis)
    can = (
        f"with {rows:,} labels: {smallest:.1%} at {confidence:.0%}"
        if smallest is not None
        else f"with {rows:,} labels no target up to 50 % is certified at {confidence:.0%}"
    )
    need = labels_needed(chains, shares, rows, target, per_diagnosis)
    needs = (
        f"; {target:.1%} needs about {need:,} labels at the observed error rates"
        if need is not None
        else f"; at the observed error rates no number of labels up to {MAX_LABELS:,} reaches "
        f"{target:.1%}"
    )
    return (
        f"{what}{first}. {can}{needs} (advice, not a guarantee: choose the target before the "
        f"next labelled run){tie}; label more rows, relax --target-risk, or improve the judge"
    )
