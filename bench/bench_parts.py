"""Where a live row's CPU goes, by the run's own functions, timed inside one run.

    python bench/bench_parts.py [--concurrency 32] [--latency-ms 200] [--rows 3200]

Starts ``bench_ceiling``'s loopback server (its own process), writes its rows, then runs
``ragbatch run --provider jev`` **in this process** (``ragbatch.cli.main``, a fresh cache)
with some of ragbatch's synchronous functions wrapped: each call's CPU time is read from the
calling thread's clock (``time.thread_time_ns``), so a function's figure is the CPU it spent,
on whichever thread, and not time spent waiting. Prints the process's CPU a row, then for each
wrapped function its CPU a row and its calls a row (a function nested in another is counted in
both). Async functions are not wrapped: their time would include their awaits. The cyclic
garbage collector's collections are timed too (``gc.callbacks``), by generation: a collection
falls on whichever function allocated, so without this line its cost hides in theirs.

Unlike a profiler, the wrappers cost ~1 µs a call and leave every other line at full speed, so
a function's figure is what it costs *amid* the run, caches cold: a group commit of the reply
cache costs several times here what it costs in a loop. Absolute figures belong to
one machine; compare trees by running them beside each other (``PYTHONPATH=... python
bench/bench_parts.py`` runs another tree's package).
"""

from __future__ import annotations

import argparse
import collections
import functools
import gc
import importlib
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_ceiling import KEY, MODEL, ROOT, ServerProcess, write_rows

# (module, qualified name) of the synchronous functions to time.
PARTS = [
    ("ragbatch.data._jsonl", "JsonlReader._parse"),
    ("ragbatch.core._questions", "build_request"),
    ("ragbatch.core._wire", "JevRequest.body"),
    ("ragbatch.providers._jev", "oversize_reason"),
    ("ragbatch.providers._jev", "estimate_input_tokens"),
    ("ragbatch.providers.cache._replies", "CachedProvider.key_for"),
    ("ragbatch.providers.cache._replies", "CachePath.lookup"),
    ("ragbatch.providers._jev", "JevProvider._read"),
    ("ragbatch.providers.cache._replies", "encode_entry"),
    ("ragbatch.providers.cache._store", "ReplyCache.commit_ops"),
    ("ragbatch.core._questions", "read_judgments"),
    ("ragbatch.core._policy", "diagnose"),
    ("ragbatch.run._runner", "_spent"),
    ("ragbatch.report._builder", "ReportBuilder.add"),
    ("ragbatch.run._calls", "CallLog.add"),
]


class Clock:
    """CPU nanoseconds and calls by wrapped function, and by garbage-collector generation."""

    def __init__(self) -> None:
        self.ns: collections.Counter[str] = collections.Counter()
        self.calls: collections.Counter[str] = collections.Counter()
        self.gc_ns: collections.Counter[int] = collections.Counter()
        self.gc_calls: collections.Counter[int] = collections.Counter()
        self._gc_started = 0

    def on_gc(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._gc_started = time.thread_time_ns()
            return
        generation = info["generation"]
        self.gc_ns[generation] += time.thread_time_ns() - self._gc_started
        self.gc_calls[generation] += 1

    def wrap(self, module_name: str, qualname: str) -> None:
        module = importlib.import_module(module_name)
        owner_name, _, name = qualname.rpartition(".")
        owner: Any = getattr(module, owner_name) if owner_name else module
        original: Callable[..., Any] = getattr(owner, name)
        clock, ns, calls = time.thread_time_ns, self.ns, self.calls

        @functools.wraps(original)
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = clock()
            try:
                return original(*args, **kwargs)
            finally:
                ns[qualname] += clock() - started
                calls[qualname] += 1

        setattr(owner, name, timed)
        if not owner_name:  # a function imported by name elsewhere: there too
            for other in list(sys.modules.values()):
                if getattr(other, "__name__", "").startswith("ragbatch") and (
                    getattr(other, name, None) is original
                ):
                    setattr(other, name, timed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--latency-ms", type=float, default=200.0)
    parser.add_argument("--rows", type=int, default=3200)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-parts-"))
    server = ServerProcess.start(args.latency_ms)
    try:
        dataset = write_rows(tmp / "rows.jsonl", args.rows)
        import ragbatch.cli._run_app  # everything a run imports, before the wrapping
        import ragbatch.run

        clock = Clock()
        for module_name, qualname in PARTS:
            clock.wrap(module_name, qualname)
        gc.callbacks.append(clock.on_gc)
        from ragbatch.cli import main as ragbatch_main

        sys.argv = [
            "ragbatch", "run", str(dataset), "--provider", "jev", "--model", MODEL,
            "--base-url", server.url, "--api-key", KEY, "--cache-dir", str(tmp / "cache"),
            "--concurrency", str(args.concurrency), "--out", str(tmp / "report.json"),
            "--quiet", "--pricing", str(ROOT / "pricing/typesafe-2026-12.json"),
        ]  # fmt: skip
        started, wall = time.process_time(), time.perf_counter()
        try:
            ragbatch_main()
        except SystemExit as exc:
            if exc.code not in (None, 0):
                raise
        cpu, wall = time.process_time() - started, time.perf_counter() - wall
    finally:
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    rows = args.rows
    import ragbatch

    print(f"ragbatch from {Path(ragbatch.__file__).parent}")
    print(
        f"{rows} rows, {args.concurrency} in flight, {args.latency_ms:g} ms: process CPU "
        f"{cpu:.2f} s ({cpu / rows * 1e6:.0f} µs a row, start-up included), wall {wall:.1f} s"
    )
    print("| function | CPU µs a row | calls a row |")
    print("|---|---|---|")
    for name, ns in clock.ns.most_common():
        print(f"| {name} | {ns / rows / 1000:.1f} | {clock.calls[name] / rows:.2f} |")
    collections_ = ", ".join(
        f"{clock.gc_calls[g]} {name} ({clock.gc_ns[g] / 1e6:.0f} ms)"
        for g, name in enumerate(("young", "middle", "full"))
    )
    print(f"garbage collections (thresholds {gc.get_threshold()} after the run): {collections_}")


if __name__ == "__main__":
    main()
