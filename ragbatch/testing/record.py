"""Record the committed replay cache: the fixture run live against the loopback Jev server.

The loopback server answers every question with the value in the row's ``mock`` block, so a
replayed ``--provider jev --offline`` report shows the same judgments as the mock report while
exercising the whole live path (HTTP, validation, cache). These are NOT real Jev answers.

    python -m ragbatch.testing.record            # rewrites cache/ and reports/expected-report-jev.json

Does I/O: starts a server on 127.0.0.1, writes the cache directory and a report.
"""

from __future__ import annotations

import argparse
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ragbatch.core import Row, build_state, canonical_json, mock_answer
from ragbatch.data import JsonlReader
from ragbatch.run import DEFAULT_DATASET, DEFAULT_PRICING, RunOptions, run_job
from ragbatch.testing.jev_server import AnswerFn, JevServer

RELEASE = "jev-1.13.0"
KEY = "loopback-recording-key"


def mock_answers(rows: Sequence[Row]) -> AnswerFn:
    """An answer function serving each row's mock block, found by the request's state."""
    by_state = {canonical_json(build_state(row)): row for row in rows}

    def answer(state: Any, qid: str, question: dict[str, Any]) -> dict[str, Any]:
        row = by_state[canonical_json(state)]
        answer = mock_answer(row, qid)
        if answer is None:
            raise KeyError(f"row {row.id} has no mock answer for {qid}")
        return answer

    return answer


def record(dataset: Path, cache_dir: Path, out: Path, pricing: Path) -> None:
    rows = list(JsonlReader(dataset))
    if cache_dir.exists():
        shutil.rmtree(cache_dir)
    with JevServer(api_key=KEY, release=RELEASE, answer_fn=mock_answers(rows)) as server:
        config = RunOptions.of(
            quiet=True,
            dataset=dataset,
            out=out,
            provider="jev",
            model=RELEASE,
            base_url=server.base_url,
            api_key=KEY,
            cache_dir=cache_dir,
            pricing=pricing,
            concurrency=8,
        )
        result = run_job(config)
    failures = result.report.modes.jev_only.failures
    if failures.count:
        raise SystemExit(f"recording failed on {failures.count} rows: {failures.by_kind}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", type=Path, default=DEFAULT_DATASET)
    parser.add_argument("--cache-dir", type=Path, default=Path("cache"))
    parser.add_argument("--out", type=Path, default=Path("reports/expected-report-jev.json"))
    parser.add_argument("--pricing", type=Path, default=DEFAULT_PRICING)
    args = parser.parse_args(argv)
    record(args.dataset, args.cache_dir, args.out, args.pricing)
    print(f"recorded {args.cache_dir} and {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
