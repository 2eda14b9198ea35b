"""Does the calibrated guarantee hold on rows the fit never saw? Seeded replications.

Each replication draws a fresh labelled set from a perfectly calibrated judge
(:mod:`bench.calibrated`), runs ``calibrate`` on it (Learn-then-Test: fit on one half,
certify on the other), and applies the policy to a second, independent fresh set. It prints,
per judge shape, the coverage and risk the policy gets on the fresh rows and the share of
replications whose fresh-row risk exceeded the target; that share must stay at about
``1 - confidence`` or below.

References measured in the same run, on the same rows:

- ``oracle``: the symmetric guarded pair (t, 1 - t) with the most fresh-row coverage whose
  fresh-row risk is within the target, chosen *with* hindsight; coverage is printed as a
  ratio of it.
- ``naive``: what ragbatch did before the guarantee: search the thresholds and bound their
  risk on the same rows (showcase routing, every labelled row), no held-out certification.

Run: ``python -m bench.bench_guarantee --replications 40`` (about 5 s per replication).
"""

from __future__ import annotations

import argparse
import statistics
import time

from bench.calibrated import SHAPES, report_rows
from ragbatch.calibrate.bounds import max_errors
from ragbatch.calibrate.fit import calibrate
from ragbatch.calibrate.guarantee import UNIFORM
from ragbatch.calibrate.policy_file import thresholds_of
from ragbatch.calibrate.rules import DECIDE, signals_of, uniform
from ragbatch.calibrate.search import Sample, count, fit
from ragbatch.core.errors import ConfigError


def samples(rows: list[dict[str, object]]) -> list[Sample]:
    return [Sample(signals_of(r), str(r["expected"])) for r in rows]


def oracle(fresh: list[Sample], target: float) -> float:
    """Hindsight: the most coverage of a symmetric guarded pair within target on ``fresh``."""
    best = 0.0
    for t in UNIFORM:
        n, k = count(fresh, uniform(t, 1 - t), DECIDE["guarded"])
        if n and k / n <= target:
            best = max(best, n / len(fresh))
    return best


def naive(
    cal: list[Sample], fresh: list[Sample], target: float, confidence: float
) -> tuple[float, float] | None:
    """Fresh-row (coverage, risk) of the showcase search bounded in-sample (None: refused)."""
    fitted, _ = fit(cal, max_errors(len(cal), target, confidence), None, "showcase")
    if fitted is None:
        return None
    n, k = count(fresh, fitted.thresholds, DECIDE["showcase"])
    return n / len(fresh), k / n if n else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replications", type=int, default=40)
    parser.add_argument("--rows", type=int, default=4000, help="labelled rows to calibrate on")
    parser.add_argument("--fresh", type=int, default=4000, help="fresh rows to check on")
    parser.add_argument("--shape", choices=[*sorted(SHAPES), "all"], default="all")
    parser.add_argument("--target-risk", type=float, default=0.05)
    parser.add_argument("--confidence", type=float, default=0.95)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    target, confidence = args.target_risk, args.confidence
    shapes = sorted(SHAPES) if args.shape == "all" else [args.shape]
    print(
        f"target risk {target}, confidence {confidence}, {args.replications} replications, "
        f"{args.rows} labelled + {args.fresh} fresh rows each"
    )
    for shape in shapes:
        coverage, risk, ratio, naive_risk, naive_coverage = [], [], [], [], []
        refused = exceeded = naive_exceeded = naive_refused = 0
        started = time.process_time()
        for r in range(args.replications):
            seed = args.seed * 100_003 + r
            cal_rows = report_rows(args.rows, seed, shape, "cal")
            fresh = samples(report_rows(args.fresh, seed + 50_000, shape, "fresh"))
            best = oracle(fresh, target)
            try:
                policy = calibrate(cal_rows, target, confidence, seed=r)
            except ConfigError:
                refused += 1
                coverage.append(0.0)
                ratio.append(0.0)
            else:
                n, k = count(fresh, thresholds_of(policy), DECIDE[policy.routing])
                coverage.append(n / len(fresh))
                ratio.append(n / len(fresh) / best if best else 0.0)
                if n:
                    risk.append(k / n)
                    exceeded += k / n > target
            found = naive(samples(cal_rows), fresh, target, confidence)
            if found is None:
                naive_refused += 1
            else:
                naive_coverage.append(found[0])
                naive_risk.append(found[1])
                naive_exceeded += found[1] > target
        cpu = (time.process_time() - started) / args.replications
        reps = args.replications
        print(f"\n{shape} judge ({cpu:.1f} s CPU per replication)")
        print(
            f"  calibrated: fresh coverage mean {statistics.mean(coverage):.3f} "
            f"(min {min(coverage):.3f}, max {max(coverage):.3f}), "
            f"{statistics.mean(ratio):.2f} of the hindsight oracle's; refused {refused}/{reps}"
        )
        if risk:
            print(
                f"  calibrated: fresh risk mean {statistics.mean(risk):.4f}, max {max(risk):.4f}; "
                f"exceeded the target in {exceeded}/{len(risk)} = {exceeded / len(risk):.3f} "
                f"of replications (must be <= about {1 - confidence:.2f})"
            )
        if naive_risk:
            print(
                f"  naive (bound on the searched rows, showcase): fresh coverage mean "
                f"{statistics.mean(naive_coverage):.3f}, risk mean "
                f"{statistics.mean(naive_risk):.4f}; exceeded the target in "
                f"{naive_exceeded}/{len(naive_risk)} = {naive_exceeded / len(naive_risk):.3f}; "
                f"refused {naive_refused}/{reps}"
            )
        else:
            print(f"  naive (bound on the searched rows, showcase): refused {naive_refused}/{reps}")


if __name__ == "__main__":
    main()
