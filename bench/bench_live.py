"""The live path against the loopback Jev server with a fixed service latency.

    python bench/bench_live.py [--rows 2000] [--latency-ms 200] [--concurrency 32]

Starts ``python -m ragbatch.testing.jev_server`` as a separate process and prints, each
against a reference measured or derived in the same run:
  * rows/s at --concurrency N as a ratio of the ideal N / latency;
  * the same at concurrency 1 (how a sequential evaluator works) and the N-vs-1 speed-up;
  * warm-cache replay (--offline) rows/s;
  * input tokens per row (one request per row) against asking one question per call,
    both billed by the server's own token count.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.synth import write_dataset
from ragbatch.core._questions import build_request
from ragbatch.data._jsonl import JsonlReader
from ragbatch.run._config import JobResult
from ragbatch.run._job import run_job
from ragbatch.run._options import RunOptions
from ragbatch.testing.jev_server import count_input_tokens

ROOT = Path(__file__).resolve().parent.parent
KEY = "bench-key"
MODEL = "jev-1.13.0"


def live_config(
    data: Path, url: str, cache: Path, concurrency: int, mode: str = "use"
) -> RunOptions:
    """A live-Jev job against the loopback server at ``url`` (no report file)."""
    return RunOptions.of(
        quiet=True,
        dataset=data,
        out=None,
        provider="jev",
        model=MODEL,
        base_url=url,
        api_key=KEY,
        cache_dir=cache,
        offline=mode == "offline",
        refresh=mode == "refresh",
        no_cache=mode == "off",
        concurrency=concurrency,
        pricing=ROOT / "pricing/typesafe-2026-12.json",
    )


def job(data: Path, url: str, cache: Path, concurrency: int, mode: str = "use") -> JobResult:
    return run_job(live_config(data, url, cache, concurrency, mode))


def single_question_tokens(data: Path) -> int:
    total = 0
    for row in JsonlReader(data):
        request = build_request(row, MODEL)
        for qid, question in request.questions.items():
            total += count_input_tokens(request.state, {qid: question.model_dump(mode="json")})
    return total


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--sequential-rows", type=int, default=50)
    parser.add_argument("--latency-ms", type=float, default=200)
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ragbatch.testing.jev_server",
            "--port",
            "0",
            "--latency-ms",
            str(args.latency_ms),
            "--api-key",
            KEY,
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        url = server.stdout.readline().strip()
        with tempfile.TemporaryDirectory() as tmp:
            data = write_dataset(Path(tmp) / "rows.jsonl", args.rows, seed=1)
            small = write_dataset(Path(tmp) / "small.jsonl", args.sequential_rows, seed=2)
            latency = args.latency_ms / 1000
            ideal = args.concurrency / latency
            cold = job(data, url, Path(tmp) / "cache", args.concurrency)
            seq = job(small, url, Path(tmp) / "cache-seq", 1)
            warm = job(data, url, Path(tmp) / "cache", args.concurrency, "offline")
            batched = cold.report.modes.jev_only.usage.input_tokens
            single = single_question_tokens(data)
    finally:
        server.terminate()
        server.wait(10)
    print(
        f"rows {args.rows}, service latency {args.latency_ms:.0f} ms, concurrency {args.concurrency}"
    )
    print(
        f"concurrency {args.concurrency}: {cold.rows_per_s:8.1f} rows/s; ideal {ideal:.1f}; "
        f"ratio {cold.rows_per_s / ideal:.3f}"
    )
    print(
        f"concurrency 1:  {seq.rows_per_s:8.1f} rows/s; ideal {1 / latency:.1f}; "
        f"ratio {seq.rows_per_s * latency:.3f}; speed-up {cold.rows_per_s / seq.rows_per_s:.1f}x"
    )
    print(
        f"warm replay:    {warm.rows_per_s:8.1f} rows/s; "
        f"{warm.rows_per_s / cold.rows_per_s:.1f}x the live run"
    )
    print(
        f"input tokens per row: {batched / args.rows:.1f} batched vs "
        f"{single / args.rows:.1f} one question per call; ratio {batched / single:.3f}"
    )


if __name__ == "__main__":
    main()
