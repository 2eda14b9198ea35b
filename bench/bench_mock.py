"""Mock-provider throughput on a synthetic 10,000-row dataset.

    python bench/bench_mock.py [--rows 10000] [--concurrency 32]

Prints rows/s of the whole job (parse, request building, mock answers, policy, metrics,
report) and, as the reference measured in the same run, rows/s of parsing the file alone.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.synth import write_dataset
from ragbatch.data._jsonl import JsonlReader
from ragbatch.run._job import run_job
from ragbatch.run._options import RunOptions

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data = write_dataset(Path(tmp) / "synth.jsonl", args.rows)
        started = time.perf_counter()
        parsed = sum(1 for _ in JsonlReader(data))
        parse_rate = parsed / (time.perf_counter() - started)
        config = RunOptions.of(
            quiet=True,
            dataset=data,
            out=Path(tmp) / "report.json",
            concurrency=args.concurrency,
            pricing=ROOT / "pricing/typesafe-2026-12.json",
        )
        started = time.perf_counter()
        result = run_job(config)
        total = time.perf_counter() - started
    rate = args.rows / total
    print(f"rows: {args.rows}, concurrency {args.concurrency}")
    print(f"parse only:   {parse_rate:10.0f} rows/s (reference)")
    print(
        f"whole job:    {rate:10.0f} rows/s ({total:.2f} s, batch part {result.rows_per_s:.0f} rows/s)"
    )
    print(f"ratio job / parse-only: {rate / parse_rate:.3f}")


if __name__ == "__main__":
    main()
