"""Does the judge audit find injected biases, and stay quiet without them? Seeded runs.

For every seed and every condition, a loopback Jev server answers with one injected bias (see
:mod:`ragbatch.testing.bias`) or none, and ``ragbatch run DATA --provider jev --probe
order,length,repeat,complement --probe-rate 1`` (the CLI, one process a run) writes a report
whose ``judgeAudit.probes`` entries are read back. The dataset is synthetic (bench.synth), a
fresh one per seed. Printed per condition, on the entry the bias targets:

- ``detected``: the share of seeds whose interval excludes zero (the flip rate's for ``order``
  and ``repeat``, which move verdicts both ways; the mean change's for ``length`` and
  ``yes-lean``, which move them one way);
- ``covers``: the share of seeds whose mean-change interval holds the injected mean change,
  known exactly from the server's rule for the probed rows (``order``: the first context
  loses D and the last gains D, a mean of 0 over a row's chunks; ``length``: D times log2 of
  the padded answer's length over the original's; ``repeat``: 0; ``yes-lean``: D), and the
  share whose flip interval holds the pooled flip rate of all seeds (the population's, by
  the law of large numbers): both near 95 % if the intervals are right;
- ``flagged``: the share of seeds where some entry is flagged at the default maximum flip rate.

Two null conditions: ``none`` (no bias: nothing may be flagged, goal >= 95 % of seeds with no
flag) and ``noise`` (a repeat jitter of 0.01, a true flip rate well under the 5 % limit: the
false flags of a judge that is a little noisy).

Run: ``python -m bench.bench_probe --seeds 40 --rows 120`` (about 1 s a run per condition).
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

import orjson

from bench.synth import write_dataset
from ragbatch.core import padded
from ragbatch.testing import JevServer
from ragbatch.testing.bias import Bias

ROOT = Path(__file__).resolve().parent.parent
KEY = "bench-key"
# condition -> (bias, probe, judgment its effect is read on)
CONDITIONS: dict[str, tuple[Bias, str | None, str | None]] = {
    "none": (Bias(), None, None),
    "noise": (Bias(repeat=0.01), "repeat", None),
    "order": (Bias(order=0.1), "order", "chunkRelevance"),
    "length": (Bias(length=0.05), "length", "groundedness"),
    "repeat": (Bias(repeat=0.05), "repeat", None),
    "yes-lean": (Bias(yes_lean=0.05), "complement", None),
}
EPSILON = 1e-9  # float noise of exact effects (yes-lean: p + p' - 1 is D to the last bit)


def run_report(data: Path, url: str, out: Path) -> dict[str, Any]:
    """``ragbatch run`` with every probe on every row; the report's ``judgeAudit`` section."""
    command = [
        sys.executable, "-m", "ragbatch", "run", str(data), "--provider", "jev",
        "--base-url", url, "--model", "jev-1.13.0", "--no-cache", "--quiet",
        "--probe", "order,length,repeat,complement", "--probe-rate", "1", "--out", str(out),
    ]  # fmt: skip
    env = {**os.environ, "TYPESAFE_API_KEY": KEY, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if done.returncode not in (0, 3):  # 3: rows failed (none should); anything else: a bug
        raise SystemExit(f"ragbatch run exited {done.returncode}: {done.stderr.strip()}")
    audit: dict[str, Any] = orjson.loads(out.read_bytes())["judgeAudit"]
    return audit


def injected_delta(condition: str, bias: Bias, rows: list[dict[str, Any]]) -> float:
    """The mean change the server's rule injects on the targeted entry (module docstring)."""
    if condition == "length":
        answers = [r["answer"] for r in rows]
        logs = [math.log2(len(padded(a)) / len(a)) for a in answers]
        return bias.length * math.fsum(logs) / len(logs)
    return bias.yes_lean if condition == "yes-lean" else 0.0


def targets(condition: str, probes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The entries the condition's bias moves (every judgment of its probe, unless one)."""
    _, probe, judgment = CONDITIONS[condition]
    return [e for e in probes if e["probe"] == probe and judgment in (None, e["judgment"])]


def excludes_zero(e: dict[str, Any], condition: str) -> bool:
    if condition in ("order", "repeat", "noise"):
        return bool(e["flipLow"] > 0)
    return bool(e["deltaLow"] > 0 or e["deltaHigh"] < 0)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_probe")
    parser.add_argument("--seeds", type=int, default=40)
    parser.add_argument("--rows", type=int, default=120)
    parser.add_argument("--conditions", default=",".join(CONDITIONS))
    args = parser.parse_args()
    results: dict[str, list[tuple[list[dict[str, Any]], float]]] = defaultdict(list)
    with tempfile.TemporaryDirectory() as tmp:
        for seed in range(args.seeds):
            data = write_dataset(Path(tmp) / f"data-{seed}.jsonl", args.rows, seed)
            rows = [orjson.loads(line) for line in data.read_bytes().splitlines()]
            for condition in args.conditions.split(","):
                bias = CONDITIONS[condition][0]
                with JevServer(api_key=KEY, bias=bias, seed=seed) as server:
                    audit = run_report(data, server.base_url, Path(tmp) / "report.json")
                results[condition].append((audit["probes"], injected_delta(condition, bias, rows)))
    print(f"{args.seeds} seeds x {args.rows} rows, every probe on every row (--probe-rate 1)")
    print(f"{'condition':<10} {'entries':>7} {'detected':>9} {'delta covers':>13} "
          f"{'flip covers':>12} {'flagged':>8}  mean flip / mean delta (injected)")  # fmt: skip
    for condition, runs in results.items():
        report_condition(condition, runs)


def report_condition(condition: str, runs: list[tuple[list[dict[str, Any]], float]]) -> None:
    """One line: the shares of seeds described in the module docstring."""
    flagged = sum(any(e["flagged"] for e in probes) for probes, _ in runs) / len(runs)
    if CONDITIONS[condition][1] is None:
        print(f"{condition:<10} {'':>7} {'':>9} {'':>13} {'':>12} {flagged:>8.1%}  "
              f"(goal: no flag in >= 95% of seeds: {1 - flagged:.1%})")  # fmt: skip
        return
    by_key: dict[tuple[str, str], list[tuple[dict[str, Any], float]]] = defaultdict(list)
    for probes, injected in runs:
        for e in targets(condition, probes):
            by_key[(e["probe"], e["judgment"])].append((e, injected))
    for (probe, judgment), entries in sorted(by_key.items()):
        pooled = math.fsum(e["flipRate"] * e["questions"] for e, _ in entries) / math.fsum(
            e["questions"] for e, _ in entries
        )
        n = len(entries)
        detected = sum(excludes_zero(e, condition) for e, _ in entries) / n
        delta_cover = (
            sum(e["deltaLow"] - EPSILON <= d <= e["deltaHigh"] + EPSILON for e, d in entries) / n
        )
        flip_cover = sum(e["flipLow"] <= pooled <= e["flipHigh"] for e, _ in entries) / n
        mean_delta = math.fsum(e["meanDelta"] for e, _ in entries) / n
        injected = math.fsum(d for _, d in entries) / n
        name = f"{condition}: {probe}/{judgment}"
        print(f"  {name:<40} {n:>3} {detected:>9.1%} {delta_cover:>13.1%} {flip_cover:>12.1%} "
              f"{flagged:>8.1%}  {pooled:.3f} / {mean_delta:+.4f} ({injected:+.4f})")  # fmt: skip


if __name__ == "__main__":
    main()
