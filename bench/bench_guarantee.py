"""Does the calibrated guarantee hold, and what does it cost? Seeded replications.

For every judge shape of :mod:`bench.judges` (calibrated, over-confident, errors concentrated
in groundedness, U-shaped) and every labelled-set size, each replication draws a fresh
labelled set, runs ``calibrate_report`` as the CLI calls it, and applies the policy to one
pool of fresh rows per shape (100k by default: a stand-in for the deployment population).
Printed per cell:

- ``refused``: the share of replications where calibration certified nothing;
- ``exceed``: the share of replications that certified a policy whose fresh-pool risk is
  above the target: what the guarantee bounds by 1 - confidence (a refusal never exceeds);
  and the same share among answered replications, a stricter figure the guarantee does not
  promise;
- ``coverage``: the mean fresh-pool coverage of answered replications, and as a share of the
  hindsight ``oracle``: the global (fail, pass) pair of either routing with the most fresh
  coverage whose fresh risk is within the target, chosen *with* the fresh pool in hand;
- ``routing``: how many answered replications chose the guarded routing;
- ``plain``: a diagnostic reference run on the same labelled sets: the plain t-ordered
  symmetric guarded ladder (t, 1 - t), tested in fixed sequence on every label at the full
  alpha, skipping the first steps that could not pass even with no error;
- ``ceiling``: per replication, the declared candidate (either routing's staircase) with the
  most fresh coverage whose *own* binomial test passes at the full alpha on the labelled set.
  Every candidate any Learn-then-Test procedure over this family certifies passes its own test
  at a level <= alpha, so in every replication it refuses at least when the ceiling does and
  certifies no more fresh coverage: the ceiling's refusals and coverage bound any such
  procedure (it is not itself valid: it ignores multiplicity);
- ``oracle (family)``: the hindsight oracle restricted to the declared staircases, and
  ``single``: the best fixed single step, max over declared candidates within the target of
  fresh coverage x P(its binomial test passes) with this many labels (refusals counted as 0).

Run: ``python -m bench.bench_guarantee --replications 200`` (the full table, about 15 min
of one core); ``--sizes 500 --shapes calibrated --replications 40`` for a quick look.
"""

from __future__ import annotations

import argparse
import math
import time
from typing import Any

import numpy as np

from bench.judges import SHAPES, UNCERTAIN, diagnose, draw, report_rows
from ragbatch.calibrate._bounds import betainc, max_errors
from ragbatch.calibrate._fit import calibrate_report
from ragbatch.calibrate._ladder import STEPS, pairs
from ragbatch.calibrate._policy_file import thresholds_of
from ragbatch.calibrate._rules import JUDGMENTS
from ragbatch.core._errors import ConfigError


def evaluate(
    answers: np.ndarray, expected: np.ndarray, fail: np.ndarray, pass_: np.ndarray, routing: str
) -> tuple[float, float]:
    """(coverage, risk) of a policy on the fresh pool."""
    d = diagnose(answers, fail, pass_, routing)
    auto = d != UNCERTAIN
    n = int(auto.sum())
    return n / len(d), float((d[auto] != expected[auto]).mean()) if n else 0.0


def oracle(answers: np.ndarray, expected: np.ndarray, target: float) -> tuple[float, str]:
    """Hindsight: the most fresh coverage of a global pair within the target, and the pair."""
    grid = sorted({*STEPS, *(1 - t for t in STEPS)})
    best, name = 0.0, "-"
    for routing in ("guarded", "showcase"):
        for f in grid:
            for p in grid:
                if f >= p:
                    continue
                coverage, risk = evaluate(answers, expected, np.full(7, f), np.full(7, p), routing)
                if coverage > best and risk <= target:
                    best, name = coverage, f"{routing} {f:g}/{p:g}"
    return best, name


Family = list[tuple[str, float, float]]  # (routing, fail, pass) in ladder order per routing


def family() -> Family:
    """The declared candidates of the labelled-set sizes benched: both routings' staircases
    (search fits only run from 4,000 labels)."""
    return [(routing, f, p) for routing in ("guarded", "showcase") for f, p in pairs()]


def plain_ladder() -> Family:
    """The plain symmetric guarded ladder, most conservative first."""
    return [("guarded", f, p) for f, p in pairs() if f + p == 1.0]


def counts(answers: np.ndarray, expected: np.ndarray, cands: Family) -> np.ndarray:
    """(automatic rows, errors) of each candidate."""
    out = np.zeros((len(cands), 2), dtype=np.int64)
    for i, (routing, f, p) in enumerate(cands):
        d = diagnose(answers, np.full(7, f), np.full(7, p), routing)
        auto = d != UNCERTAIN
        out[i] = int(auto.sum()), int((d[auto] != expected[auto]).sum())
    return out


def binom_cdf(k: int, n: int, p: float) -> float:
    """P(Bin(n, p) <= k)."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    return 1.0 - betainc(k + 1.0, float(n - k), p)


def single_step(coverage: float, risk: float, size: int, kmax: list[int]) -> float:
    """P(the binomial test of one fixed step passes on ``size`` labels), its automatic rows
    Bin(size, coverage) and their errors Bin(rows, risk) (the bulk of the row count only)."""
    sd = (size * coverage * (1.0 - coverage)) ** 0.5
    lo = max(1, int(size * coverage - 8 * sd))
    hi = min(size, int(size * coverage + 8 * sd) + 1)
    total = 0.0
    for m in range(lo, hi + 1):
        if kmax[m] < 0:
            continue
        log_pmf = (
            math.lgamma(size + 1)
            - math.lgamma(m + 1)
            - math.lgamma(size - m + 1)
            + m * math.log(max(coverage, 1e-300))
            + (size - m) * math.log1p(-min(coverage, 1.0 - 1e-16))
        )
        total += math.exp(log_pmf) * binom_cdf(kmax[m], m, risk)
    return total


def first_passing_run(rows: np.ndarray, kmax: list[int]) -> int | None:
    """Fixed sequence: the last step of the first run of passing steps (steps that could not
    pass with no error skipped at the start), or None."""
    chosen = None
    for i, (n, k) in enumerate(rows):
        if kmax[n] < 0 and chosen is None:
            continue
        if k > kmax[n]:
            break
        chosen = i
    return chosen


def cell(shape: str, size: int, reps: int, fresh: dict[str, Any], args: Any) -> dict[str, Any]:
    """One (shape, labelled rows) cell of the table."""
    answers, expected = fresh["answers"], fresh["expected"]
    kmax = max_errors(size, args.target_risk, args.confidence)
    refused = exceeded = guarded = 0
    coverage: list[float] = []
    plain: list[int | None] = []
    ceiling: list[float] = []
    for r in range(reps):
        a, c, e = draw(size, shape, args.seed * 1_000_003 + size * 1009 + r)
        plain.append(first_passing_run(counts(a, e, fresh["plain"]), kmax))
        own = counts(a, e, fresh["family"])
        passing = [i for i, (n, k) in enumerate(own) if 0 <= k <= kmax[n]]
        if passing:
            ceiling.append(max(fresh["family_coverage"][i] for i in passing))
        report = {"rows": report_rows(a, c, e)}
        try:
            policy = calibrate_report(report, args.target_risk, args.confidence, seed=r)
        except ConfigError:
            refused += 1
            continue
        pairs = thresholds_of(policy)
        fail = np.array([pairs[name][0] for name in JUDGMENTS])
        pass_ = np.array([pairs[name][1] for name in JUDGMENTS])
        cov, risk = evaluate(answers, expected, fail, pass_, policy.routing)
        coverage.append(cov)
        exceeded += risk > args.target_risk
        guarded += policy.routing == "guarded"
    answered = reps - refused
    plain_cov = [fresh["plain_coverage"][i] for i in plain if i is not None]
    plain_risk = [fresh["plain_risk"][i] for i in plain if i is not None]
    return {
        "plain_refused": 1.0 - len(plain_cov) / reps,
        "plain_coverage": float(np.mean(plain_cov)) if plain_cov else 0.0,
        "plain_exceed": sum(x > args.target_risk for x in plain_risk) / reps,
        "ceiling_refused": 1.0 - len(ceiling) / reps,
        "ceiling_coverage": float(np.mean(ceiling)) if ceiling else 0.0,
        "single": max(
            (
                cov * single_step(cov, risk, size, kmax)
                for cov, risk in zip(fresh["family_coverage"], fresh["family_risk"], strict=True)
                if risk <= args.target_risk
            ),
            default=0.0,
        ),
        "refused": refused / reps,
        "exceed": exceeded / reps,
        "exceed_answered": exceeded / answered if answered else 0.0,
        "coverage": float(np.mean(coverage)) if coverage else 0.0,
        "guarded": guarded,
        "answered": answered,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--replications", type=int, default=200)
    parser.add_argument("--sizes", type=int, nargs="+", default=[200, 500, 2000])
    parser.add_argument("--shapes", nargs="+", choices=SHAPES, default=list(SHAPES))
    parser.add_argument("--fresh", type=int, default=100_000, help="fresh rows per shape")
    parser.add_argument("--target-risk", type=float, default=0.05)
    parser.add_argument("--confidence", type=float, default=0.95)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    print(
        f"target risk {args.target_risk}, confidence {args.confidence}, "
        f"{args.replications} replications per cell, {args.fresh:,} fresh rows per shape\n"
    )
    print(
        "| judge | labels | refused | exceedance (all / answered) | fresh coverage | oracle "
        "| ratio | guarded | plain ladder: refused / coverage / exceed | ceiling: refused / "
        "coverage | oracle (family) | single |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    notes = []
    for shape in args.shapes:
        a, _, e = draw(args.fresh, shape, 999_999)
        best, best_pair = oracle(a, e, args.target_risk)
        fresh: dict[str, Any] = {"answers": a, "expected": e}
        for name, cands in (("family", family()), ("plain", plain_ladder())):
            rows = counts(a, e, cands)
            fresh[name] = cands
            fresh[f"{name}_coverage"] = [n / len(e) for n, _ in rows]
            fresh[f"{name}_risk"] = [k / n if n else 0.0 for n, k in rows]
        within = [
            (cov, i)
            for i, (cov, risk) in enumerate(
                zip(fresh["family_coverage"], fresh["family_risk"], strict=True)
            )
            if risk <= args.target_risk
        ]
        family_best, at = max(within, default=(0.0, -1))
        routing, f, p = fresh["family"][at] if at >= 0 else ("-", 0.0, 0.0)
        notes.append(f"{shape}: oracle {best_pair}; in the family {routing} {f:g}/{p:g}")
        for size in args.sizes:
            started = time.process_time()
            out = cell(shape, size, args.replications, fresh, args)
            cpu = (time.process_time() - started) / args.replications
            ratio = out["coverage"] / best if best else 0.0
            print(
                f"| {shape} | {size:,} | {out['refused']:.1%} | {out['exceed']:.1%} / "
                f"{out['exceed_answered']:.1%} "
                f"| {out['coverage']:.3f} | {best:.3f} | {ratio:.2f} "
                f"| {out['guarded']}/{out['answered']} "
                f"| {out['plain_refused']:.1%} / {out['plain_coverage']:.3f} / "
                f"{out['plain_exceed']:.1%} "
                f"| {out['ceiling_refused']:.1%} / {out['ceiling_coverage']:.3f} "
                f"| {family_best:.3f} | {out['single']:.3f} |  <!-- {cpu:.2f} s CPU/rep -->",
                flush=True,
            )
    print()
    for note in notes:
        print(note)


if __name__ == "__main__":
    main()
