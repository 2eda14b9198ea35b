"""Coverage and width of ``ragbatch infer``'s corrected rates on synthetic traffic.

    python bench/bench_infer.py [--rows 5000] [--replications 500] [--rates 0.02,0.05,0.1]

One synthetic population per judge shape (true diagnoses and groundedness known), judged by:

* ``calibrated``: right 92 % of the time, errors spread over the other diagnoses;
* ``pass-biased``: right 95 % of the time otherwise, but calls 28 % of the failing rows PASS
  (with the fallback rows, the any-failure rate understated by 10 points);
* ``concentrated``: right everywhere but on GENERATOR_UNGROUNDED, half of which it calls PASS;
* ``agreement-70``: right 70 % of the time.

5 % of the rows go to fallback (JUDGE_UNCERTAIN), where the cascade takes a baseline right
80 % of the time. Each replication draws human labels with ``audit-sample``'s own stratified
sampler (a new seed) at each rate, labels them with the truth, and runs the PPI++ estimator
of ``ragbatch infer``. Printed per case: coverage of the 95 % interval (the share of
replications whose interval holds the true rate; goal >= 0.94) for "any failure" (Jev-only
and cascade), groundedness, and the worst of the diagnosis rates; the mean interval width
relative to labels-only (goal <= 0.8 for good judges, never > 1.02); the judge's raw bias.
The population is fixed and the sample random: the design-based setting the interval claims.
"""

from __future__ import annotations

import argparse
import random
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ragbatch.calibrate._audit import audit_sample
from ragbatch.metrics._ppi import Estimate, Labelled, Population, ppi_rate

TRUE_SHARES = {
    "PASS": 0.60,
    "RETRIEVAL_MISS": 0.12,
    "RETRIEVAL_INSUFFICIENT": 0.08,
    "GENERATOR_UNGROUNDED": 0.10,
    "ANSWER_INCORRECT": 0.06,
    "CONFLICTING_EVIDENCE": 0.04,
}
LABELS = tuple(TRUE_SHARES)
FALLBACK = 0.05
GOOD = ("calibrated", "pass-biased", "concentrated")


def other(rng: random.Random, label: str) -> str:
    return rng.choice([d for d in LABELS if d != label])


def judge_of(shape: str) -> Callable[[random.Random, str], str]:
    """The judge's diagnosis of a row given its true one."""

    def judge(rng: random.Random, truth: str) -> str:
        if shape == "calibrated":
            return truth if rng.random() < 0.92 else other(rng, truth)
        if shape == "pass-biased":
            if truth != "PASS" and rng.random() < 0.28:
                return "PASS"
            return truth if rng.random() < 0.95 else other(rng, truth)
        if shape == "concentrated":
            return "PASS" if truth == "GENERATOR_UNGROUNDED" and rng.random() < 0.5 else truth
        return truth if rng.random() < 0.70 else other(rng, truth)

    return judge


@dataclass
class Case:
    rows: list[dict[str, Any]]  # report rows as audit-sample reads them
    truth: list[str]  # human diagnosis per row
    grounded: list[bool]  # human groundedness per row
    cascade: list[str]  # the cascade's final verdict per row


def population(shape: str, n: int, seed: int) -> Case:
    rng = random.Random(seed)
    judge = judge_of(shape)
    rows, truth, grounded, cascade = [], [], [], []
    for i in range(n):
        t = rng.choices(LABELS, weights=list(TRUE_SHARES.values()))[0]
        said = judge(rng, t)
        fallback = rng.random() < FALLBACK
        diagnosis = "JUDGE_UNCERTAIN" if fallback else said
        baseline = t if rng.random() < 0.8 else other(rng, t)
        is_grounded = t != "GENERATOR_UNGROUNDED"
        judged_grounded = said != "GENERATOR_UNGROUNDED"
        rows.append(
            {
                "id": f"r{i:05d}",
                "status": "ok",
                "diagnosis": diagnosis,
                "route": "fallback" if fallback else "auto",
                "retrieval": {"chunkRelevance": {"c1": 0.9}, "sufficiency": 0.9, "conflict": 0.1},
                "generation": {
                    "relevance": 0.9,
                    "groundedness": 0.8 if judged_grounded else 0.2,
                    "contradiction": 0.1,
                },
            }
        )
        truth.append(t)
        grounded.append(is_grounded)
        cascade.append(baseline if fallback else said)
    return Case(rows, truth, grounded, cascade)


Figure = tuple[str, Sequence[float], Sequence[float]]  # name, judge 0/1, truth 0/1 per row


def figures(case: Case) -> list[Figure]:
    jev = [r["diagnosis"] for r in case.rows]
    fails = [float(t != "PASS") for t in case.truth]
    out: list[Figure] = [
        ("anyFailure jev-only", [float(d not in ("PASS", "JUDGE_UNCERTAIN")) for d in jev], fails),
        ("anyFailure cascade", [float(d != "PASS") for d in case.cascade], fails),
        (
            "groundedness",
            [float(r["generation"]["groundedness"] >= 0.5) for r in case.rows],
            [float(g) for g in case.grounded],
        ),
    ]
    out += [
        (f"diagnosis:{d}", [float(x == d) for x in jev], [float(t == d) for t in case.truth])
        for d in LABELS
    ]
    return out


def estimate(
    case: Case, figure: Figure, strata: list[str], chosen: dict[int, float]
) -> Estimate | None:
    _, f, y = figure
    pop: dict[str, Population] = {}
    for key, judged in zip(strata, f, strict=True):
        old = pop.get(key, Population(0, 0.0))
        pop[key] = Population(old.rows + 1, old.judged + judged)
    items = [Labelled(strata[i], y[i], f[i], 1.0 / p) for i, p in chosen.items()]
    return ppi_rate(pop, items)


def run_case(case: Case, rate: float, reps: int) -> dict[str, Any]:
    figs = figures(case)
    strata = [f"{r['diagnosis']}/{r['route']}" for r in case.rows]
    index = {r["id"]: i for i, r in enumerate(case.rows)}
    truth = {name: statistics.fmean(y) for name, _, y in figs}
    hits: dict[str, int] = dict.fromkeys(truth, 0)
    widths: dict[str, list[float]] = {name: [] for name in truth}
    only: dict[str, list[float]] = {name: [] for name in truth}
    labels = 0
    for seed in range(reps):
        lines = audit_sample(case.rows, rate, seed)
        chosen = {index[line["id"]]: line["inclusionProbability"] for line in lines}
        labels = len(chosen)
        for fig in figs:
            e = estimate(case, fig, strata, chosen)
            assert e is not None
            hits[fig[0]] += e.low <= truth[fig[0]] <= e.high
            widths[fig[0]].append(e.high - e.low)
            only[fig[0]].append(e.labels_only.high - e.labels_only.low)
    return {
        "labels": labels,
        "coverage": {k: v / reps for k, v in hits.items()},
        "width": {k: statistics.fmean(widths[k]) / statistics.fmean(only[k]) for k in truth},
        "bias": {name: statistics.fmean(f) - truth[name] for name, f, _ in figs},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=5000)
    parser.add_argument("--replications", type=int, default=500)
    parser.add_argument("--rates", default="0.02,0.05,0.1")
    args = parser.parse_args()
    rates = [float(r) for r in args.rates.split(",")]
    print(
        f"{args.rows} rows, {args.replications} replications per case; coverage of the 95 % "
        "interval (goal >= 0.94), width relative to labels-only (goal <= 0.8 good judges, "
        "never > 1.02), judge's raw bias (any failure, Jev-only)"
    )
    header = (
        "| judge | labels | cover anyFail jev | cover anyFail cascade | cover grounded | "
        "worst cover diagnosis | width anyFail | width grounded | worst width | raw bias |"
    )
    print(header)
    print("|" + " --- |" * 10)
    for shape_seed, shape in enumerate(
        ("calibrated", "pass-biased", "concentrated", "agreement-70")
    ):
        case = population(shape, args.rows, 1000 + shape_seed)
        for rate in rates:
            r = run_case(case, rate, args.replications)
            cov, width = r["coverage"], r["width"]
            diag = [k for k in cov if k.startswith("diagnosis:")]
            print(
                f"| {shape} | {r['labels']} ({rate:.0%}) | {cov['anyFailure jev-only']:.3f} | "
                f"{cov['anyFailure cascade']:.3f} | {cov['groundedness']:.3f} | "
                f"{min(cov[k] for k in diag):.3f} | {width['anyFailure jev-only']:.2f} | "
                f"{width['groundedness']:.2f} | {max(width.values()):.2f} | "
                f"{r['bias']['anyFailure jev-only']:+.3f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
