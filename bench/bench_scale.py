"""Warm-cache replay at growing sizes: rows/s and peak RSS of ``ragbatch run --offline``.

    python bench/bench_scale.py [--sizes 10000,100000] [--work-dir DIR]
    python bench/bench_scale.py --sizes 10000,100000,1000000 --repeat 3   # the full run

One synthetic dataset of small rows (``bench.synth.write_small_dataset``: 1-2 contexts of
~20 words) of the largest size is written; every smaller size is its prefix. Each size gets
its own cache holding exactly its rows (a 10k replay against a 1M-entry SQLite file would
mostly measure cold B-tree pages). A cache is warmed **in-process, without a server**: for each row the
exact request ``build_request(row, MODEL)`` is built and a reply is stored under
``request_key(ENDPOINT, request)`` with ``encode_entry`` - answers deterministic from the key
(a replay only needs replies that validate against their request, not the server's values).

Each size is then replayed by a fresh ``python -m ragbatch run ... --provider jev --offline``
subprocess. Wall time and peak RSS are that child's own (``os.wait4`` rusage, so one size's
peak never hides in another's); rows/s is taken from the run record (evaluation and the
per-row summary work, which happens as rows complete) and from the wall time (interpreter
start-up and report writing included). The goal in the issue: peak RSS under 400 MB at 1M
rows, rows/s flat within 20% across sizes. At the default ``--max-report-rows`` (10,000) the
smallest size also builds the per-row table of the report, which larger sizes leave out;
``--max-report-rows 0`` makes every size do the same work per row. The marginal rate (extra
rows over extra run time, against the previous size) cancels fixed start-up costs, which
otherwise make the smallest size look slow per row.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.synth import write_small_dataset
from ragbatch.core._provider import Reply
from ragbatch.core._questions import build_request, estimate_input_tokens
from ragbatch.core._schema import TokenUsage
from ragbatch.core._wire import NoulAnswer, request_key
from ragbatch.data._jsonl import JsonlReader
from ragbatch.providers._jev import ENDPOINT
from ragbatch.providers.cache._replies import ReplyCache, encode_entry

ROOT = Path(__file__).resolve().parent.parent
MODEL = "jev-1.13.0"
PRICING = ROOT / "pricing/typesafe-2026-12.json"


def reply_for(key: str, question_ids: list[str], input_tokens: int) -> Reply:
    """A reply deterministic from the cache key: 3 hex digits of the key per answer."""
    answers = {
        qid: NoulAnswer(type="noul", noul=int(key[3 * i : 3 * i + 3], 16) / 4095)
        for i, qid in enumerate(question_ids)
    }
    usage = TokenUsage(input_tokens=input_tokens, output_tokens=2 * len(answers))
    latency = 40.0 + int(key[-4:], 16) % 200
    return Reply(model=MODEL, answers=answers, usage=usage, latency_ms=latency)


def warm_cache(dataset: Path, cache_dir: Path) -> int:
    """Store a reply for every row of ``dataset`` (skipped when the cache is already full)."""
    cache = ReplyCache(cache_dir)
    try:
        written = 0
        for row in JsonlReader(dataset):
            request = build_request(row, MODEL)
            key = request_key(ENDPOINT, request)
            reply = reply_for(key, list(request.questions), estimate_input_tokens(request))
            cache.put(key, encode_entry(reply, key))
            written += 1
        return written
    finally:
        cache.close()


def prefix(source: Path, target: Path, rows: int) -> Path:
    with source.open("rb") as src, target.open("wb") as out:
        for _, line in zip(range(rows), src, strict=False):
            out.write(line)
    return target


def replay(
    dataset: Path,
    cache_dir: Path,
    tmp: Path,
    max_memory_mb: int | None = None,
    timeout_s: float | None = None,
    max_report_rows: int | None = None,
) -> tuple[float, float, float, int]:
    """(wall s, rows/s from the run record, peak RSS MB, exit code) of one fresh subprocess."""
    record = tmp / f"{dataset.stem}.record.json"
    command = [
        sys.executable, "-m", "ragbatch", "run", str(dataset), "--provider", "jev",
        "--offline", "--model", MODEL, "--cache-dir", str(cache_dir), "--pricing", str(PRICING),
        "--out", str(tmp / f"{dataset.stem}.report.json"), "--quiet", "--run-record", str(record),
    ]  # fmt: skip
    if max_report_rows is not None:
        command += ["--max-report-rows", str(max_report_rows)]
    started = time.perf_counter()

    def cap() -> None:  # address-space cap: a MemoryError in the child, not the OOM killer
        if max_memory_mb is not None:
            limit = max_memory_mb * 2**20
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    proc = subprocess.Popen(command, cwd=ROOT, preexec_fn=cap, stderr=subprocess.DEVNULL)
    while True:  # wait4: this child's own rusage, not the maximum over all children
        pid, status, usage = os.wait4(proc.pid, 0 if timeout_s is None else os.WNOHANG)
        if pid:
            break
        if timeout_s is not None and time.perf_counter() - started > timeout_s:
            proc.kill()
            timeout_s = None
        time.sleep(0.05)
    wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    rate = float(orjson.loads(record.read_bytes())["rowsPerSecond"]) if record.exists() else 0.0
    return wall, rate, usage.ru_maxrss / 1024, proc.returncode  # ru_maxrss is KiB on Linux


@contextmanager
def work_dir(path: str | None) -> Iterator[Path]:
    if path is not None:
        Path(path).mkdir(parents=True, exist_ok=True)
        yield Path(path)
    else:
        with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
            yield Path(tmp)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="10000,100000", help="comma-separated row counts")
    parser.add_argument(
        "--work-dir", help="keep the dataset and warm cache here (reused by the next run)"
    )
    parser.add_argument(
        "--max-memory-mb",
        type=int,
        help="address-space limit of each replay (RLIMIT_AS): a run that needs more fails",
    )
    parser.add_argument("--timeout-s", type=float, help="kill a replay that runs longer")
    parser.add_argument(
        "--repeat", type=int, default=1, help="replays per size; the median run is reported"
    )
    parser.add_argument(
        "--max-report-rows",
        type=int,
        help="passed to every replay (default: ragbatch's own, 10,000); 0 = aggregates only at "
        "every size, so each size does the same work per row",
    )
    args = parser.parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(","))
    with work_dir(args.work_dir) as tmp:
        full = tmp / f"small-{sizes[-1]}.jsonl"
        started = time.perf_counter()
        if not full.exists():
            write_small_dataset(full, sizes[-1], seed=7)
        generated = time.perf_counter() - started
        print(
            f"os.cpu_count() {os.cpu_count()}; dataset {sizes[-1]} rows "
            f"({full.stat().st_size / sizes[-1]:.0f} B/row) in {generated:.1f} s"
        )
        datasets: dict[int, tuple[Path, Path]] = {}
        for size in sizes:  # each size replays its own cache, as a CI replay would
            data = full if size == sizes[-1] else prefix(full, tmp / f"small-{size}.jsonl", size)
            cache_dir = tmp / f"cache-{size}"
            started = time.perf_counter()
            warmed = warm_cache(data, cache_dir) if not (cache_dir / "cache.db").exists() else 0
            print(
                f"cache for {size} rows: {warmed} entries warmed in-process in "
                f"{time.perf_counter() - started:.1f} s"
            )
            datasets[size] = data, cache_dir
        print(
            f"{'rows':>9} {'wall s':>8} {'rows/s run':>11} {'rows/s wall':>12} {'peak RSS MB':>12}"
        )
        base: tuple[int, float, float] | None = None  # the first size that completed
        previous: tuple[int, float] | None = None  # (rows, run rows/s) of the last size
        for size in sizes:
            data, cache_dir = datasets[size]
            runs = [
                replay(
                    data, cache_dir, tmp, args.max_memory_mb, args.timeout_s, args.max_report_rows
                )
                for _ in range(args.repeat)
            ]
            failed = [r for r in runs if r[3] not in (0, 3)]
            if failed:
                wall, _, rss, code = failed[0]
                print(f"{size:>9} {wall:>8.2f} replay exited {code}; peak RSS {rss:.1f} MB")
                continue
            wall, rate, rss, _ = sorted(runs, key=lambda r: r[1])[len(runs) // 2]
            spread = f" (runs: {', '.join(f'{r[1]:.0f}' for r in runs)})" if len(runs) > 1 else ""
            by_wall = size / wall
            base = base or (size, rate, by_wall)
            # rows/s of the extra rows over the previous size: fixed start-up costs cancel out
            marginal = ""
            if previous is not None and rate > 0 and previous[1] > 0:
                extra_s = size / rate - previous[0] / previous[1]
                marginal = f", marginal {(size - previous[0]) / extra_s:.0f} rows/s"
            previous = (size, rate)
            print(
                f"{size:>9} {wall:>8.2f} {rate:>11.1f} {by_wall:>12.1f} {rss:>12.1f}"
                f"   ratio to {base[0]}: run {rate / base[1]:.2f}, wall {by_wall / base[2]:.2f}"
                f"{marginal}{spread}"
            )


if __name__ == "__main__":
    main()
