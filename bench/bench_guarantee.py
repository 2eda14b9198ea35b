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
- ``routing``: how many answered replications chose the guarded routing.

Run: ``python -m bench.bench_guarantee --replications 200`` (the full table, about 20 min
of one core); ``--sizes 500 --shapes calibrated --replications 40`` for a quick look.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np

from bench.judges import SHAPES, UNCERTAIN, diagnose, draw, report_rows
from ragbatch.calibrate._fit import calibrate_report
from ragbatch.calibrate._ladder import STEPS
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


def oracle(answers: np.ndarray, expected: np.ndarray, target: float) -> float:
    """Hindsight: the most fresh coverage of a global pair within the target."""
    grid = sorted({*STEPS, *(1 - t for t in STEPS)})
    best = 0.0
    for routing in ("guarded", "showcase"):
        for f in grid:
            for p in grid:
                if f >= p:
                    continue
                coverage, risk = evaluate(answers, expected, np.full(7, f), np.full(7, p), routing)
                if coverage > best and risk <= target:
                    best = coverage
    return best


def cell(
    shape: str, size: int, reps: int, fresh: tuple[np.ndarray, np.ndarray], args: Any
) -> dict[str, Any]:
    """One (shape, labelled rows) cell of the table."""
    answers, expected = fresh
    refused = exceeded = guarded = 0
    coverage: list[float] = []
    for r in range(reps):
        a, c, e = draw(size, shape, args.seed * 1_000_003 + size * 1009 + r)
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
    return {
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
        "| ratio | guarded |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for shape in args.shapes:
        a, _, e = draw(args.fresh, shape, 999_999)
        best = oracle(a, e, args.target_risk)
        for size in args.sizes:
            started = time.process_time()
            out = cell(shape, size, args.replications, (a, e), args)
            cpu = (time.process_time() - started) / args.replications
            ratio = out["coverage"] / best if best else 0.0
            print(
                f"| {shape} | {size:,} | {out['refused']:.1%} | {out['exceed']:.1%} / "
                f"{out['exceed_answered']:.1%} "
                f"| {out['coverage']:.3f} | {best:.3f} | {ratio:.2f} "
                f"| {out['guarded']}/{out['answered']} |  <!-- {cpu:.2f} s CPU/rep -->",
                flush=True,
            )


if __name__ == "__main__":
    main()
