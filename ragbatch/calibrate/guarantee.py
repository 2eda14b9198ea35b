"""A risk guarantee that survives the threshold search: Learn-then-Test on a held-out split (pure).

The guarantee, its procedure and its one assumption are stated in docs/semantics.md §5.

Choosing thresholds on the same rows that bound their risk makes "95 % confidence" optimistic:
the search picks whichever candidate got lucky. Learn-then-Test (Angelopoulos, Bates, Candès,
Jordan, Lei 2021) with fixed-sequence testing keeps the guarantee:

1. The labelled rows are split, seeded, into a *fit* part and a *certify* part.
2. On the fit part only, candidate policies are searched for every routing and a ladder of
   in-sample risk levels (:func:`ragbatch.calibrate.search.fit`), and ordered from the most
   to the least conservative by their fit-part Clopper-Pearson upper bound.
3. On the certify part, candidate i is tested in that order against H_i "the error rate of
   the automatic rows exceeds the target": H_i is rejected when the one-sided Clopper-Pearson
   bound of its certify errors is within the target (equivalently the binomial p-value
   P(Bin(n_i, target) <= k_i) <= 1 - confidence). Testing stops at the first H_i kept.
4. Fixed-sequence testing controls the family-wise error at 1 - confidence, so *every*
   rejected candidate meets the target with that confidence at once; the one with the most
   automatic certify rows is chosen.

The one assumption: rows the policy will judge are exchangeable with the labelled rows (drawn
from the same distribution). Given which rows a fixed policy decides automatically (a function
of Jev's answers only), their errors are then independent Bernoulli draws of its risk, which
is what the binomial test needs.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from ragbatch.calibrate.bounds import is_within, max_errors, upper_bound
from ragbatch.calibrate.rules import DECIDE, Pair, uniform
from ragbatch.calibrate.search import Fitted, Sample, count, fit

METHOD = "learn-then-test"
ASSUMPTION = "rows the policy judges are exchangeable with the labelled rows"
CERTIFY_SHARE = 0.5
# In-sample risk levels (multiples of the target) whose fits become candidates.
LADDER = (0.5, 1.0)
# The symmetric pairs (t, 1 - t) tried as candidates of their own.
UNIFORM = (0.005, 0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.07, 0.08, 0.1, 0.12, 0.15, 0.2, 0.25, 0.3)


@dataclass(frozen=True, slots=True)
class Candidate:
    """One candidate policy with its fit-part and (once tested) certify-part counts."""

    routing: str
    fitted: Fitted
    fit_auto: int
    fit_errors: int
    fit_bound: float
    certify_auto: int = 0
    certify_errors: int = 0
    certified: bool = False


@dataclass(frozen=True, slots=True)
class Certification:
    """The outcome: the chosen candidate (None: nothing certified) and what was tested."""

    chosen: Candidate | None
    tested: tuple[Candidate, ...]  # in test order, up to and including the first kept H_i
    candidates: int
    fit_rows: int
    certify_rows: int
    best_fit_min_errors: list[int]  # for a refusal's "best achievable" sentence


def split(
    samples: Sequence[Sample], seed: int, share: float = CERTIFY_SHARE
) -> tuple[list[Sample], list[Sample]]:
    """(fit, certify): a seeded shuffle, the last ``share`` of it certifies."""
    order = list(range(len(samples)))
    random.Random(f"certify-split:{seed}").shuffle(order)
    cut = len(order) - round(len(order) * share)
    fit_part = sorted(order[:cut])
    certify_part = sorted(order[cut:])
    return [samples[i] for i in fit_part], [samples[i] for i in certify_part]


def _key(c: Candidate) -> tuple[str, tuple[tuple[str, Pair], ...]]:
    return c.routing, tuple(sorted(c.fitted.thresholds.items()))


def _uniform(t: float) -> Fitted:
    return Fitted(fail=t, pass_=1.0 - t, thresholds=uniform(t, 1.0 - t), refined=())


def symmetric(grid: Sequence[float] | None) -> list[float]:
    """The t of the symmetric candidate pairs (t, 1 - t): ``UNIFORM`` or the grid folded."""
    return list(UNIFORM) if grid is None else sorted({min(g, 1 - g) for g in grid} - {0.5})


def best_symmetric(
    rows: Sequence[Sample],
    target: float,
    confidence: float,
    routing: str,
    grid: Sequence[float] | None = None,
) -> Fitted | None:
    """The symmetric pair automating the most ``rows`` within the target (None: none does)."""
    best: tuple[int, Fitted] | None = None
    for t in symmetric(grid):
        fitted = _uniform(t)
        n, k = count(rows, fitted.thresholds, DECIDE[routing])
        if n and is_within(k, n, target, confidence) and (best is None or n > best[0]):
            best = (n, fitted)
    return None if best is None else best[1]


def candidates(
    fit_rows: Sequence[Sample],
    target: float,
    confidence: float,
    routings: Sequence[str],
    grid: Sequence[float] | None,
    seed: int = 0,
) -> tuple[list[Candidate], list[int]]:
    """Distinct candidates found on the fit rows in test order, and the fewest errors seen
    per automatic-row count (for a refusal message).

    Two families per routing: one symmetric pair (t, 1 - t) for every t of ``UNIFORM``, and
    the search's fits (a global pair, then per-judgment refinement) at the ``LADDER`` of
    in-sample risk levels. A candidate's test-order key is the Clopper-Pearson bound of its
    errors on fit rows it was not chosen on: all fit rows for a symmetric pair (one number,
    nothing to overfit), the second half of the fit rows for a search fit made on the first
    half (refinement moves one judgment at a time and can overfit; this keeps an overfitted
    candidate from the front of the sequence, where its failure would end the test).
    """
    found: dict[tuple[str, tuple[tuple[str, Pair], ...]], Candidate] = {}
    min_errors = [-1] * (len(fit_rows) + 1)
    learn, rank_on = split(fit_rows, seed + 1, 0.5)

    def add(routing: str, fitted: Fitted, key_rows: Sequence[Sample]) -> None:
        rule = DECIDE[routing]
        n, k = count(fit_rows, fitted.thresholds, rule)
        if min_errors[n] < 0 or k < min_errors[n]:
            min_errors[n] = k
        kn, kk = (n, k) if key_rows is fit_rows else count(key_rows, fitted.thresholds, rule)
        if n == 0 or kn == 0:
            return
        c = Candidate(routing, fitted, n, k, upper_bound(kk, kn, confidence))
        if _key(c) not in found or c.fit_bound < found[_key(c)].fit_bound:
            found[_key(c)] = c

    for routing in routings:
        for t in symmetric(grid):
            add(routing, _uniform(t), fit_rows)
        for level in LADDER:
            kmax = max_errors(len(learn), min(target * level, 0.999), confidence)
            fitted, _ = fit(learn, kmax, grid, routing)
            if fitted is not None:
                add(routing, fitted, rank_on)
    ordered = sorted(found.values(), key=lambda c: (c.fit_bound, c.fit_auto, c.routing))
    return ordered, min_errors


def certify(
    samples: Sequence[Sample],
    target: float,
    confidence: float,
    routings: Sequence[str],
    seed: int = 0,
    grid: Sequence[float] | None = None,
) -> Certification:
    """Learn-then-Test over the candidates of every routing (module docstring)."""
    fit_rows, certify_rows = split(samples, seed)
    ordered, min_errors = candidates(fit_rows, target, confidence, routings, grid, seed)
    tested: list[Candidate] = []
    for c in ordered:
        n, k = count(certify_rows, c.fitted.thresholds, DECIDE[c.routing])
        ok = is_within(k, n, target, confidence)
        tested.append(
            Candidate(
                c.routing, c.fitted, c.fit_auto, c.fit_errors, c.fit_bound, n, k, certified=ok
            )
        )
        if not ok:
            break
    passed = [c for c in tested if c.certified]
    chosen = max(passed, key=lambda c: (c.certify_auto, -c.certify_errors), default=None)
    return Certification(
        chosen=chosen,
        tested=tuple(tested),
        candidates=len(ordered),
        fit_rows=len(fit_rows),
        certify_rows=len(certify_rows),
        best_fit_min_errors=min_errors,
    )
