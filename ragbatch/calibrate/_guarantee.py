"""A risk guarantee that survives the threshold choice: fixed-sequence testing (pure).

Choosing thresholds on the rows that bound their risk makes "95 % confidence" optimistic.
Learn-then-Test (Angelopoulos, Bates, Candès, Jordan, Lei 2021) keeps the guarantee by
testing candidate policies, each against H "the error rate of its automatic rows exceeds the
target", with a procedure that controls the family-wise error at alpha = 1 - confidence. The
procedure here is declared before any label is read (docs/semantics.md §5):

1. **Ladders on every labelled row.** Each routing searched has a ladder of (fail, pass)
   pairs fixed in advance (:mod:`ragbatch.calibrate._ladder`), from the most to the least
   conservative. Its steps are tested in that order on *all* labelled rows, with no split:
   the order does not depend on the data, so fixed-sequence testing is valid as is.
2. **Skipping what cannot pass.** A step with so few automatic rows that even :func:`slack`
   errors (none below 1,000 labelled rows, else 2) would not reject H at its
   level is skipped instead of ending the ladder: a first step that one unlucky error would
   fail is where most refusals came from. The rule reads only how many rows are automatic
   (Jev's answers) and how many are labelled, never a label.
3. **Graphical alpha between ladders.** The ladders share alpha by fixed weights
   (``LADDER_WEIGHTS``: the guarded ladder all of it, the showcase ladder none of its own,
   since it never won in the bench and every share it held was power the guarded ladder
   lost); a ladder stops at its first kept H, and a ladder whose every step is rejected
   passes its alpha on to the others still to test, which go on testing at the larger level
   (Bretz et al. 2009's graphical procedure, of which the fallback procedure is a case). So
   the showcase ladder is tested only when every guarded step passed, at the guarded level.
4. **Learned order only with many labels.** With at least ``LEARN_MIN_ROWS`` labelled rows,
   per-judgment search fits (whose order must be learned) get their own ``SEARCH_SHARE`` of
   alpha: found on a seeded half, tested in fixed sequence on the other half. Below that the
   split costs more than the fits gain, and they are not candidates at all. The rule reads
   only the number of labelled rows.
5. With ``per_diagnosis`` targets, H of a step is the union of "pooled risk above the target"
   and "risk of automatic diagnosis d above its own target" for every listed d; it is
   rejected only when each part is (an intersection-union test: valid at the same level).

With probability >= confidence no true H is rejected, so every certified candidate meets
its targets at once; of them the one automating the largest share of its rows is chosen. Each binomial test
reads the errors among a policy's automatic rows as independent draws of its risk, which
holds when the labelled rows are i.i.d. draws from the deployment distribution and their
labels are the truth (``assumption``).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from ragbatch.calibrate._bounds import betainc, max_errors, upper_bound
from ragbatch.calibrate._ladder import Count, count_one, pairs, tally, thresholds
from ragbatch.calibrate._search import Fitted, Sample, fit

LADDER = "fixed-sequence"  # the one method name of a ladder step's certificate
SEARCH = "learn-then-test"  # a search fit's: found on one half, certified on the other
LADDER_WEIGHTS = {"guarded": 1.0, "showcase": 0.0}  # the initial share of the ladders' alpha
LEARN_MIN_ROWS = 4000
SEARCH_SHARE = 0.5
SEARCH_LEVELS = (0.5, 1.0)
SLACK_ROWS = 1000
MAX_SLACK = 2  # in-sample risk levels (multiples of the target) of the fits


def assumption(per_diagnosis: bool, traces: bool = False) -> str:
    """What the guarantee assumes, in one clause (``traces``: some labelled rows are
    multi-step traces, each one draw, decided and routed whole)."""
    pooled = "per automatic diagnosis as listed" if per_diagnosis else "pooled over diagnoses"
    whole = (
        " (a multi-step trace counts as one row, right when its trace verdict is its own "
        "label; rows and traces in the deployment's mix)"
        if traces
        else ""
    )
    return (
        f"the labelled rows{whole} and the rows the policy will judge are i.i.d. draws from "
        f"the same deployment distribution, the labels are the truth, the risk is {pooled}, "
        "and this was one run with its seed and target chosen before seeing the labels"
    )


@dataclass(frozen=True, slots=True)
class Candidate:
    """One candidate policy, with its counts on the rows it is tested on (once tested)."""

    routing: str
    method: str  # LADDER or SEARCH
    fitted: Fitted
    rows: int = 0  # rows it is tested on: every labelled row (ladder) or the certify half
    count: Count = field(default_factory=Count)
    level: float = 0.0  # the alpha it was tested at
    certified: bool = False

    @property
    def coverage(self) -> float:
        return self.count.auto / self.rows if self.rows else 0.0


@dataclass(frozen=True, slots=True)
class Certification:
    """The outcome: the chosen candidate (None: nothing certified) and what was tested."""

    chosen: Candidate | None
    tested: tuple[Candidate, ...]  # in test order, skipped steps left out
    rows: int
    search_rows: int  # the certify half of the learned family (0: it did not run)


def p_value(auto: int, errors: int, target: float) -> float:
    """P(Bin(auto, target) <= errors): small when the risk is below the target."""
    if auto <= 0 or errors >= auto:
        return 1.0
    return max(0.0, 1.0 - betainc(errors + 1.0, float(auto - errors), target))


def joint_p(count: Count, target: float, per_diagnosis: Mapping[str, float] | None) -> float:
    """The intersection-union p-value: the largest over the pooled and listed diagnoses."""
    p = p_value(count.auto, count.errors, target)
    for diagnosis, own in (per_diagnosis or {}).items():
        auto, errors = count.by_diagnosis.get(diagnosis, (0, 0))
        p = max(p, p_value(auto, errors, own))  # no automatic row of it: nothing bounds it
    return p


def slack(rows: int) -> int:
    """Errors a tested step must be able to absorb: none below ``SLACK_ROWS`` labelled rows
    (a first step that needs more would automate too much), then ``MAX_SLACK`` (a rule on
    the row count, fixed in advance)."""
    return MAX_SLACK if rows >= SLACK_ROWS else 0


def reachable(
    count: Count, target: float, per: Mapping[str, float] | None, level: float, spare: int = 0
) -> bool:
    """Whether ``spare`` errors (pooled; none per diagnosis) would still reject H at
    ``level``. Reads the automatic-row counts only, never a label."""
    if count.auto <= spare:
        return False
    clean = Count(count.auto, spare, {d: (a, 0) for d, (a, _) in count.by_diagnosis.items()})
    return joint_p(clean, target, per) <= level


def _uniform(pair: tuple[float, float]) -> Fitted:
    return Fitted(fail=pair[0], pass_=pair[1], thresholds=thresholds(pair), refined=())


def ladders(
    samples: Sequence[Sample], routings: Sequence[str], grid: Sequence[float] | None
) -> dict[str, list[Candidate]]:
    """Every routing's ladder with its counts on all ``samples``."""
    steps = pairs(grid)
    out: dict[str, list[Candidate]] = {}
    for routing in sorted(routings, key=lambda r: r != "guarded"):  # guarded tested first
        counts = tally(samples, steps, routing)
        out[routing] = [
            Candidate(routing, LADDER, _uniform(pair), len(samples), c)
            for pair, c in zip(steps, counts, strict=True)
        ]
    return out


def graphical(
    chains: Mapping[str, Sequence[Candidate]],
    alpha: Mapping[str, float],
    target: float,
    per_diagnosis: Mapping[str, float] | None,
) -> list[Candidate]:
    """Fixed-sequence testing along each chain with alpha passed on from exhausted chains.

    Returns every tested candidate (certified or the one that stopped its chain), in the
    order tested; skipped ones (:func:`reachable`) are left out.
    """
    level = dict(alpha)
    position = dict.fromkeys(chains, 0)
    running = list(chains)  # a chain at level 0 waits for alpha handed over
    tested: list[Candidate] = []
    stopped: dict[str, Candidate] = {}
    moved = True
    while moved:
        moved = False
        for name in list(running):
            chain = chains[name]
            while level[name] > 0 and position[name] < len(chain):
                c = chain[position[name]]
                if not reachable(c.count, target, per_diagnosis, level[name], slack(c.rows)):
                    position[name] += 1
                    continue
                ok = joint_p(c.count, target, per_diagnosis) <= level[name]
                result = replace(c, level=level[name], certified=ok)
                if stopped.get(name) != result:
                    tested.append(result)
                if not ok:
                    stopped[name] = result
                    break
                stopped.pop(name, None)
                position[name] += 1
            if position[name] == len(chain):  # exhausted: its alpha goes to the others
                running.remove(name)
                rest = [other for other in running if position[other] < len(chains[other])]
                for other in rest:
                    level[other] += level[name] / len(rest)
                level[name] = 0.0
                moved = moved or bool(rest)
    return tested


def ladder_shares(routings: Sequence[str], alpha: float, learned: bool) -> dict[str, float]:
    """Each routing ladder's initial alpha: the fixed weights (all of it for a lone routing),
    halved when search fits run."""
    total = alpha * (1.0 - SEARCH_SHARE) if learned else alpha
    if len(routings) == 1:
        return {routings[0]: total}
    weight = sum(LADDER_WEIGHTS[r] for r in routings)
    return {r: total * LADDER_WEIGHTS[r] / weight for r in routings}


def certify(
    samples: Sequence[Sample],
    target: float,
    confidence: float,
    routings: Sequence[str],
    seed: int = 0,
    grid: Sequence[float] | None = None,
    per_diagnosis: Mapping[str, float] | None = None,
) -> Certification:
    """The procedure of the module docstring; the choice among certified candidates is the
    largest share of automatic rows, then the earliest tested."""
    alpha = 1.0 - confidence
    learned = len(samples) >= LEARN_MIN_ROWS
    chains: dict[str, list[Candidate]] = dict(ladders(samples, routings, grid))
    shares = ladder_shares(routings, alpha, learned)
    search_rows = 0
    if learned:
        fit_part, certify_part = split(samples, seed)
        search_rows = len(certify_part)
        chains["search"] = searched(fit_part, certify_part, target, confidence, routings, grid)
        shares["search"] = alpha * SEARCH_SHARE
    tested = graphical(chains, shares, target, per_diagnosis)
    passed = [c for c in tested if c.certified]
    chosen = max(passed, key=lambda c: c.coverage, default=None)
    return Certification(chosen, tuple(tested), len(samples), search_rows)


def split(samples: Sequence[Sample], seed: int) -> tuple[list[Sample], list[Sample]]:
    """(fit, certify): a seeded shuffle cut in halves."""
    order = list(range(len(samples)))
    random.Random(f"certify-split:{seed}").shuffle(order)
    cut = len(order) // 2
    return [samples[i] for i in sorted(order[:cut])], [samples[i] for i in sorted(order[cut:])]


def searched(
    fit_part: Sequence[Sample],
    certify_part: Sequence[Sample],
    target: float,
    confidence: float,
    routings: Sequence[str],
    grid: Sequence[float] | None,
) -> list[Candidate]:
    """Search fits on ``fit_part`` (per routing, at ``SEARCH_LEVELS``), ordered by the
    Clopper-Pearson bound of their fit-part errors, counted on ``certify_part``."""
    found: list[tuple[float, int, Candidate]] = []
    for routing in routings:
        for level in SEARCH_LEVELS:
            kmax = max_errors(len(fit_part), min(target * level, 0.999), confidence)
            fitted, _ = fit(fit_part, kmax, grid, routing)
            if fitted is None:
                continue
            own = count_one(fit_part, fitted.thresholds, routing)
            held = count_one(certify_part, fitted.thresholds, routing)
            c = Candidate(routing, SEARCH, fitted, len(certify_part), held)
            found.append((upper_bound(own.errors, own.auto, confidence), -own.auto, c))
    found.sort(key=lambda item: (item[0], item[1], item[2].routing))
    return [c for _, _, c in found]
