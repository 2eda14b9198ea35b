"""Multi-step traces beside single-turn rows: CPU a judged step against CPU a row, and
requests a trace cold and warm (docs/semantics.md §8).

    python bench/bench_traces.py [--traces 2000] [--turns 2] [--hops 2] [--concurrency 32]
        [--latency-ms 50] [--repeat 1] [--profile]

Writes ``--traces`` traces of ``--turns`` turns, each turn ``--hops`` hops of two documents
then an answer, and the **equivalent rows**: one row a turn, with the turn's question, every
document its hops returned and its answer (the same texts). Each run is a fresh
``python -m ragbatch run`` process whose user+sys CPU is read from ``os.wait4`` (as in
``bench_ceiling``); every client keeps its bytecode in a cache of the bench's own, filled by
an unmeasured run first. The stacks, each run on the rows and on the traces:

* ``live cold``: ``--provider jev`` against ``bench_ceiling``'s lean loopback server (its own
  process, ``--latency-ms``, ``--concurrency`` in flight) with a fresh cache;
* ``live warm``: the same run again on that cache (every request a cache hit);
* ``mock``: the offline mock provider (no cache, no network).

A one-item run of each stack (one trace, one row) gives its start-up; the **marginal** CPU of
a judged step (of a row) is the whole run's less start-up, over the other steps (rows). Prints
a table a stack, with the requests the server saw a trace (cold: its judged steps; warm: 0)
beside a row's (1 and 0), and the ratio of the marginal CPU a judged step to a row's; the goal
is at most 1.2x. ``--repeat N`` runs every stack N times (rows and traces alternating which
goes first) and prints each ratio and the median. ``--profile`` then runs the traces' live
cold run once more, in this process under cProfile, and prints the functions with the most
own time.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import os
import pstats
import random
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_ceiling import KEY, MODEL, ROOT, ServerProcess
from bench.synth import sentence

PRICING = ROOT / "pricing/typesafe-2026-12.json"
STACKS = ("live cold", "live warm", "mock")


def document(rng: random.Random, doc_id: str) -> dict[str, str]:
    return {"id": doc_id, "text": " ".join(sentence(rng, 14) for _ in range(4))}


def write_datasets(tmp: Path, traces: int, turns: int, hops: int) -> tuple[Path, Path]:
    """The traces and their equivalent rows (one a turn), same texts, fixed seed."""
    rng = random.Random(1)
    trace_path, row_path = tmp / f"traces-{traces}.jsonl", tmp / f"rows-{traces}.jsonl"
    with trace_path.open("wb") as trace_file, row_path.open("wb") as row_file:
        for t in range(traces):
            steps: list[dict[str, Any]] = []
            for turn in range(turns):
                question = sentence(rng, 10).rstrip(".") + "?"
                steps.append({"kind": "user", "text": question})
                contexts = []
                for hop in range(hops):
                    found = [document(rng, f"t{turn}h{hop}d{d}") for d in range(2)]
                    contexts += found
                    query = sentence(rng, 6).rstrip(".")
                    steps.append({"kind": "retrieval", "query": query, "contexts": found})
                answer = " ".join(sentence(rng, 12) for _ in range(3))
                steps.append({"kind": "answer", "text": answer})
                row = {"id": f"row-{t:06d}-{turn}", "question": question, "contexts": contexts,
                       "answer": answer}  # fmt: skip
                row_file.write(orjson.dumps(row) + b"\n")
            trace_file.write(orjson.dumps({"id": f"trace-{t:06d}", "steps": steps}) + b"\n")
    return trace_path, row_path


def head(path: Path, lines: int) -> Path:
    """The first ``lines`` lines of ``path``, as a file of its own (a start-up run's data)."""
    out = path.with_name(f"head{lines}-{path.name}")
    out.write_bytes(b"".join(path.read_bytes().splitlines(keepends=True)[:lines]))
    return out


@dataclass
class Measured:
    cpu_s: float
    wall_s: float
    requests: int


class Bench:
    def __init__(self, tmp: Path, concurrency: int, latency_ms: float) -> None:
        self.tmp = tmp
        self.concurrency = concurrency
        self.server = ServerProcess.start(latency_ms)
        (tmp / "cwd").mkdir()
        self.runs = 0

    def args(self, stack: str, dataset: Path, cache: Path) -> list[str]:
        common = [
            "run", str(dataset), "--concurrency", str(self.concurrency), "--quiet",
            "--out", str(self.tmp / "report.json"), "--pricing", str(PRICING),
        ]  # fmt: skip
        if stack == "mock":
            return common
        return [
            *common, "--provider", "jev", "--model", MODEL, "--base-url", self.server.url,
            "--api-key", KEY, "--cache-dir", str(cache),
        ]  # fmt: skip

    def client(self, args: list[str]) -> Measured:
        """One ``ragbatch`` process: its CPU (os.wait4), wall and the requests it sent."""
        env = {**os.environ, "PYTHONPYCACHEPREFIX": str(self.tmp / "pycache")}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        self.server.stats()  # reset the server's count
        started = time.perf_counter()
        # a neutral working directory: with -m the current one comes first on sys.path; the
        # mock's warning (rows answered by word overlap) is read only if the run fails
        with (self.tmp / "stderr").open("w+") as err:
            process = subprocess.Popen([sys.executable, "-m", "ragbatch", *args], env=env,
                                       cwd=self.tmp / "cwd", stderr=err)  # fmt: skip
            _, status, usage = os.wait4(process.pid, 0)
            wall = time.perf_counter() - started
            if os.waitstatus_to_exitcode(status) != 0:
                err.seek(0)
                raise SystemExit(f"ragbatch {' '.join(args[:2])} exited {status}: {err.read()}")
        return Measured(usage.ru_utime + usage.ru_stime, wall, self.server.stats()["requests"])

    def measure(self, stack: str, dataset: Path) -> Measured:
        """``stack`` on ``dataset``; a warm run first makes the cache it then reads."""
        self.runs += 1
        cache = self.tmp / f"cache-{self.runs}"
        if stack == "live warm":
            self.client(self.args("live cold", dataset, cache))
        return self.client(self.args(stack, dataset, cache))

    def close(self) -> None:
        self.server.stop()


@dataclass
class Case:
    """One stack on the rows and on the traces: whole runs and their start-up runs."""

    stack: str
    rows: Measured
    rows_one: Measured
    traces: Measured
    traces_one: Measured

    def row_ms(self, count: int) -> float:
        return (self.rows.cpu_s - self.rows_one.cpu_s) / (count - 1) * 1000

    def step_ms(self, steps: int, per_trace: int) -> float:
        return (self.traces.cpu_s - self.traces_one.cpu_s) / (steps - per_trace) * 1000


def measure_case(bench: Bench, stack: str, data: dict[str, Path], rows_first: bool) -> Case:
    order = ["rows", "traces"] if rows_first else ["traces", "rows"]
    got: dict[str, Measured] = {}
    for name in order:
        got[name] = bench.measure(stack, data[name])
        got[f"{name}_one"] = bench.measure(stack, data[f"{name}_one"])
    return Case(stack, got["rows"], got["rows_one"], got["traces"], got["traces_one"])


def profile(bench: Bench, traces: Path, top: int = 30) -> None:
    """The traces' live cold run once more, in this process under cProfile: own time first."""
    from ragbatch.cli import main as cli_main

    sys.argv = ["ragbatch", *bench.args("live cold", traces, bench.tmp / "cache-profiled")]
    profiler = cProfile.Profile()
    profiler.enable()
    with contextlib.suppress(SystemExit):  # the command line ends in one
        cli_main()
    profiler.disable()
    pstats.Stats(profiler).sort_stats("tottime").print_stats(top)


def report(cases: list[Case], o: argparse.Namespace) -> None:
    """A line a case, then each stack's ratios and their median."""
    per_trace = o.turns * (o.hops + 1)  # judged steps a trace: its hops and its answers
    rows, steps = o.traces * o.turns, o.traces * per_trace
    print(
        f"{o.traces} traces of {o.turns} turns x {o.hops} hops ({steps} judged steps, "
        f"{per_trace} a trace) beside {rows} rows (one a turn, the same texts); "
        f"{o.concurrency} in flight, live at {o.latency_ms:g} ms"
    )
    print(
        "| stack | requests a trace (judged steps) | requests a row | CPU ms a judged step "
        "| CPU ms a row | step / row | wall s traces / rows |"
    )
    print("|---|---|---|---|---|---|---|")
    ratios: dict[str, list[float]] = {stack: [] for stack in STACKS}
    for case in cases:
        step, row = case.step_ms(steps, per_trace), case.row_ms(rows)
        ratios[case.stack].append(step / row)
        requests = "-" if case.stack == "mock" else f"{case.traces.requests / o.traces:g}"
        per_row = "-" if case.stack == "mock" else f"{case.rows.requests / rows:g}"
        print(
            f"| {case.stack} | {requests} ({per_trace}) | {per_row} | {step:.3f} "
            f"| {row:.3f} | **{step / row:.2f}x** "
            f"| {case.traces.wall_s:.1f} / {case.rows.wall_s:.1f} |"
        )
    for stack, values in ratios.items():
        shown = " / ".join(f"{v:.2f}x" for v in values)
        print(f"  {stack}: CPU a judged step / a row {shown} (median "
              f"{statistics.median(values):.2f}x; goal <= 1.2x)")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--traces", type=int, default=2000)
    parser.add_argument("--turns", type=int, default=2)
    parser.add_argument("--hops", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--latency-ms", type=float, default=50)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--profile", action="store_true")
    o = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory(prefix="bench-traces-") as name:
        tmp = Path(name)
        trace_path, row_path = write_datasets(tmp, o.traces, o.turns, o.hops)
        data = {"traces": trace_path, "rows": row_path, "traces_one": head(trace_path, 1),
                "rows_one": head(row_path, 1)}  # fmt: skip
        bench = Bench(tmp, o.concurrency, o.latency_ms)
        try:
            bench.measure("mock", data["rows_one"])  # fills the bytecode cache, unmeasured
            cases = [
                measure_case(bench, stack, data, rows_first=(r % 2 == 0))
                for r in range(o.repeat)
                for stack in STACKS
            ]
            report(cases, o)
            print(f"load average after: {os.getloadavg()[0]:.2f}")
            if o.profile:
                profile(bench, trace_path)
        finally:
            bench.close()


if __name__ == "__main__":
    main()
