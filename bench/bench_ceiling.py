"""The live client's ceiling: rows/s against ideal and client CPU per row, by concurrency.

    python bench/bench_ceiling.py [--concurrency 32,64,128,256,512] [--latency-ms 250]
        [--rows 8000] [--waves 32] [--case 32:200:3200] [--reference REV]
        [--without-sniffio] [--no-replay] [--no-cache-stack] [--shared-stack] [--repeat N]
        [--instructions [--slowdown 40]]

A lean asyncio loopback server (raw asyncio streams, HTTP/1.1 keep-alive, a valid Jev reply
for the request's questions after a scripted latency) runs as its own process; its CPU per
request is printed next to every run to show it is not the bound. Each run is a fresh
``python -m ragbatch run --provider jev`` subprocess with its own empty cache (one request per
row, rows of 3 contexts: 8 questions); its user+sys CPU is the whole process's (``os.wait4``).

* ideal rows/s = min(concurrency, rows) / latency; ``run`` is the run record's rows/s (the
  evaluation), ``whole`` counts the process from exec to exit (imports and report included).
* ``--case C:MS:ROWS`` adds runs at other latencies (default: the issue's 32 at 200 ms, 3,200
  rows); the sweep runs min(--rows, --waves x concurrency) rows at each concurrency.
* ``--reference REV`` also runs the package as it was at git revision REV (``git archive``
  into a temporary directory, same interpreter), in the same run, and prints the ratios;
  REV may also be a directory that holds such a ``ragbatch`` package (no git needed).
* ``--without-sniffio`` runs every client as if sniffio were not installed (anyio >= 4.11
  no longer pulls it in): ``import sniffio`` then fails after a real search of sys.path
  outside site-packages, as it does on such an interpreter.
* ``--no-cache-stack`` adds the stack ``this --no-cache``: the same package without the reply
  cache, so the cost of the cache's guarantees (a kill -9 loses at most the calls in flight,
  processes sharing a cache never pay twice: a group commit and a lease a row) shows apart
  from the rest of the row.
* ``--shared-stack`` adds the stack ``this shared``: the same package, its cache directory
  shared with another live process that holds a lease there for the whole run, so the run
  writes a lease row for every key (a process alone in its cache leases in memory: see
  ``ragbatch.providers.cache._lease``); the cost of never paying twice across processes.
* ``--instructions`` counts instructions instead of CPU time: every client process runs under
  valgrind's callgrind (``valgrind`` on PATH), and each CPU figure becomes billions of
  instructions (a run) or millions (a row). CPU time on a shared machine moves by ±10 %
  between identical runs; instruction counts far less (two identical 2,000-row runs: 0.2 %),
  so a change of a few percent shows. Under valgrind a client is ~40-50x slower, so the
  server's latency is multiplied by ``--slowdown`` (default 40): a client starved of CPU
  gathers more rows into each cache commit than it does at full speed and looks cheaper than
  it is (32 in flight: 3.04 M instructions a marginal row at 200 ms, 3.36 M at 200 ms x 50).
  The "of ideal" columns tell whether it kept up; the times are valgrind's. Small cases are
  enough, and are its defaults: ``--waves 4`` and the extra case ``32:200:320`` (a few minutes
  a run; with the CPU defaults a whole sweep took hours).
* ``--repeat N`` runs every case N times, each time starting with another stack, and
  prints the median ratios (each taken within one repetition).
* After the sweep, each stack replays its 256-concurrency cache ``--offline`` (warm-cache
  rows/s).
* The **floor** (``bench/floor_client.py``) runs in the same run as ragbatch at every case:
  the least a useful client does (read the JSONL, build the body ragbatch sends, POST it with
  one ``aiohttp.ClientSession`` at the same concurrency, parse the reply with orjson, write a
  JSON line a row); its bodies are checked byte-identical to ragbatch's ``build_request``
  first. Each stack's line ends with its CPU a row and rows/s as ratios to the floor's; a
  one-row run of each stack gives its start-up CPU, and the marginal CPU a row is the whole
  run less that, over the other rows. Client processes keep their bytecode in a cache of
  their own (``PYTHONPYCACHEPREFIX``), filled by an unmeasured one-row run first. The replay floor reads the cache entries, decodes them
  and writes a line a row: ``--offline`` is compared with it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import re
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.synth import sentence

FLOOR = Path(__file__).resolve().parent / "floor_client.py"
NO_CACHE_STACK = "this --no-cache"  # ``this`` without the reply cache (--no-cache-stack)
SHARED_STACK = "this shared"  # ``this`` beside another process's lease (--shared-stack)
# Run with the ragbatch under test on sys.path while a ``this shared`` client runs: another
# process of its cache directory, holding a lease there until its stdin closes.
ANOTHER_OWNER = """
import sys
from ragbatch.providers.cache import ReplyCache
from ragbatch.providers.cache._lease import Leases
cache = ReplyCache(sys.argv[1])
leases = Leases(cache.db_path)
assert leases.acquire("another process's key")
print("holding", flush=True)
sys.stdin.read()
leases.close()
cache.close()
"""

ROOT = Path(__file__).resolve().parent.parent
KEY = "bench-key"
MODEL = "jev-1.13.0"
LABELS = ["PASS", "RETRIEVAL_MISS", "GENERATOR_UNGROUNDED", "ANSWER_INCORRECT"]

# Run first in a client process under --without-sniffio (see the module docstring).
NO_SNIFFIO = """
import importlib.machinery, sys
class _NoSniffio:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name != "sniffio":
            return None
        outside = [p for p in sys.path if "site-packages" not in p]
        importlib.machinery.PathFinder.find_spec(name, outside)
        raise ModuleNotFoundError("No module named 'sniffio'", name=name)
sys.meta_path.insert(0, _NoSniffio)
"""
# Run with the ragbatch under test on sys.path: the model and questions of the bench rows
# requests, and a check that the floor client's bodies equal ragbatch's for every row.
CAPTURE = """
import orjson, sys
sys.path.insert(0, {floor_dir!r})
from floor_client import body_for
from ragbatch.core._questions import build_request
from ragbatch.data._jsonl import JsonlReader
raw = open({dataset!r}, "rb").read().splitlines()
template = None
for line, row in zip(raw, JsonlReader({dataset!r})):
    request = build_request(row, {model!r})
    if template is None:
        template = {{"model": request.model, "questions": request.model_dump(
            mode="json", exclude_none=True)["questions"]}}
    assert body_for(orjson.loads(line), template) == request.body(), row.id
open({out!r}, "wb").write(orjson.dumps(template))
"""
FLOOR_STACK = "floor"
LAUNCH = """
import runpy, sys
sys.argv = ["ragbatch", *sys.argv[1:]]
runpy.run_module("ragbatch", run_name="__main__", alter_sys=True)
"""


class Cost(NamedTuple):
    """What a client's cost is counted in: its word, the unit of a run, and of a row."""

    name: str
    whole: str
    per_row: str


CPU = Cost("CPU", "s", "ms/row")
INSTRUCTIONS = Cost("instructions", "G", "M/row")
COST = CPU  # main() sets INSTRUCTIONS under --instructions
COLLECTED = re.compile(rb"Collected : (\d+)")  # callgrind's count, on its stderr


# --- the server -----------------------------------------------------------------------------


class Server:
    """HTTP/1.1 keep-alive on raw asyncio streams; answers ``POST /v1/systemone``."""

    def __init__(self, latency_s: float) -> None:
        self.latency_s = latency_s
        self.requests = 0
        self.in_flight = 0
        self.max_in_flight = 0

    def answer(self, body: bytes) -> bytes:
        request = orjson.loads(body)
        seed = zlib.crc32(orjson.dumps(request["state"]))
        answers: dict[str, Any] = {}
        for qid, question in request["questions"].items():
            unit = zlib.crc32(qid.encode(), seed) / 2**32
            if question["type"] == "noul":
                answers[qid] = {"type": "noul", "noul": round(unit, 3)}
            else:  # choice: the first option, the rest share what is left
                options = list(question["criteria"])
                rest = round((1 - unit) / (len(options) - 1), 3)
                probs = {o: rest for o in options[1:]}
                probs[options[0]] = round(1 - rest * (len(options) - 1), 3)
                top = max(probs, key=probs.__getitem__)
                answers[qid] = {
                    "type": "choice", "choice": top, "confidence": probs[top],
                    "probabilities": probs,
                }  # fmt: skip
        usage = {"input_tokens": 260 + len(body) // 4, "output_tokens": 2 * len(answers)}
        return orjson.dumps({"model": request["model"], "answers": answers, "usage": usage})

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.split(b"\r\n")
                path = lines[0].split(b" ")[1]
                length, auth = 0, b""
                for line in lines[1:]:
                    name, _, value = line.partition(b":")
                    name = name.strip().lower()
                    if name == b"content-length":
                        length = int(value)
                    elif name == b"authorization":
                        auth = value.strip()
                body = await reader.readexactly(length) if length else b""
                status, data = await self.route(path, auth, body)
                writer.write(
                    b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n"
                    b"x-typesafe-request-id: req-%d\r\n\r\n%s"
                    % (status, b"OK" if status == 200 else b"ERROR", len(data), self.requests, data)
                )
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def route(self, path: bytes, auth: bytes, body: bytes) -> tuple[int, bytes]:
        if path == b"/bench/stats":  # read and reset the counters
            stats = {"requests": self.requests, "maxInFlight": self.max_in_flight}
            self.requests = self.max_in_flight = 0
            return 200, orjson.dumps(stats)
        if path != b"/v1/systemone":
            return 404, b'{"error":{"message":"not found"}}'
        if auth != b"Bearer " + KEY.encode():
            return 401, b'{"error":{"message":"invalid api key"}}'
        self.requests += 1
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.latency_s)
            return 200, self.answer(body)
        finally:
            self.in_flight -= 1


async def serve(latency_s: float) -> None:
    server = Server(latency_s)
    listener = await asyncio.start_server(server.handle, "127.0.0.1", 0, backlog=4096)
    port = listener.sockets[0].getsockname()[1]
    print(f"http://127.0.0.1:{port}", flush=True)
    async with listener:
        await listener.serve_forever()


@dataclass
class ServerProcess:
    process: subprocess.Popen[str]
    url: str

    @classmethod
    def start(cls, latency_ms: float) -> ServerProcess:
        command = [sys.executable, __file__, "--serve", "--latency-ms", str(latency_ms)]
        process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        assert process.stdout is not None
        return cls(process, process.stdout.readline().strip())

    def cpu_s(self) -> float:
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stats(self) -> dict[str, int]:
        with urllib.request.urlopen(f"{self.url}/bench/stats", timeout=10) as response:
            data: dict[str, int] = orjson.loads(response.read())
            return data

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(10)


# --- the client runs ------------------------------------------------------------------------


def write_rows(path: Path, rows: int, seed: int = 1) -> Path:
    """Rows of 3 contexts, no reference answer: 8 questions, ~1,160 input tokens a request."""
    rng = random.Random(seed)
    with path.open("wb") as handle:
        for i in range(rows):
            row = {
                "id": f"ceil-{i:07d}",
                "question": sentence(rng, 10).rstrip(".") + "?",
                "contexts": [
                    {"id": f"c{k + 1}", "text": " ".join(sentence(rng, 14) for _ in range(4))}
                    for k in range(3)
                ],
                "answer": " ".join(sentence(rng, 12) for _ in range(3)),
                "expected": {"diagnosis": rng.choice(LABELS)},
                "baseline": {"diagnosis": rng.choice(LABELS), "confidence": rng.random()},
            }
            handle.write(orjson.dumps(row) + b"\n")
    return path


@dataclass
class Run:
    stack: str
    concurrency: int
    latency_ms: float
    rows: int
    wall_s: float
    cpu_s: float
    run_rate: float
    peak_client: int
    peak_server: int
    server_cpu_ms: float  # per request

    @property
    def ideal(self) -> float:
        return min(self.concurrency, self.rows) / (self.latency_ms / 1000)

    @property
    def whole_rate(self) -> float:
        return self.rows / self.wall_s

    def marginal_ms(self, startup_cpu_s: float) -> float:
        """CPU a row beyond start-up: the whole run less a one-row run, over the other rows."""
        return (self.cpu_s - startup_cpu_s) / max(self.rows - 1, 1) * 1000

    def versus(self, floor: Run, startup: dict[str, float]) -> str:
        """This stack's CPU a row and rows/s as ratios to the floor's, and its marginal CPU."""
        base = self.stack.removeprefix("replay ")
        floor_base = floor.stack.removeprefix("replay ")
        own, low = startup.get(base), startup.get(floor_base)
        marginal = ""
        if own is not None and low is not None:
            mine, theirs = self.marginal_ms(own), floor.marginal_ms(low)
            marginal = (
                f"; marginal {mine:.2f} vs {theirs:.2f} {COST.per_row} = {mine / theirs:.2f}x"
            )
        return (
            f"  {self.stack} / {floor.stack}: {COST.name} a row {self.cpu_s / floor.cpu_s:.2f}x, "
            f"rows/s {self.run_rate / floor.run_rate:.2f}x (run), "
            f"{self.whole_rate / floor.whole_rate:.2f}x (whole){marginal}"
        )

    def line(self, reference: Run | None) -> str:
        if self.stack.startswith("replay"):  # no service latency: no ideal
            return (
                f"| {self.stack} | {self.concurrency} | - | {self.rows} | - "
                f"| {self.run_rate:.0f} | - | - | {self.cpu_s / self.rows * 1000:.2f} | - | - |"
            )
        text = (
            f"| {self.stack} | {self.concurrency} | {self.latency_ms:g} | {self.rows} "
            f"| {self.ideal:.0f} | {self.run_rate:.0f} | {self.run_rate / self.ideal:.2f} "
            f"| {self.whole_rate / self.ideal:.2f} | {self.cpu_s / self.rows * 1000:.2f} "
            f"| {self.peak_client} / {self.peak_server} | {self.server_cpu_ms:.2f} |"
        )
        if reference is not None:
            text += (
                f" {self.run_rate / reference.run_rate:.2f}x rows/s, "
                f"{reference.cpu_s / self.cpu_s:.2f}x less {COST.name} |"
            )
        return text


def header() -> str:
    return (
        "| stack | concurrency | latency ms | rows | ideal rows/s | rows/s | of ideal (run) "
        f"| of ideal (whole) | client {COST.name} {COST.per_row} | peak in flight client / "
        "server | server CPU ms/req |"
    )


class Bench:
    def __init__(
        self,
        tmp: Path,
        stacks: dict[str, Path],
        without_sniffio: bool,
        instructions: bool = False,
    ) -> None:
        self.tmp = tmp
        self.stacks = stacks
        self.without_sniffio = without_sniffio
        self.instructions = instructions  # clients under callgrind: cost in G instructions
        self.servers: dict[float, ServerProcess] = {}
        self.datasets: dict[int, Path] = {}
        self.replayed = "this"  # the stack whose cache the replay floor reads
        (tmp / "cwd").mkdir()

    def server(self, latency_ms: float) -> ServerProcess:
        if latency_ms not in self.servers:
            self.servers[latency_ms] = ServerProcess.start(latency_ms)
        return self.servers[latency_ms]

    def dataset(self, rows: int) -> Path:
        if rows not in self.datasets:
            self.datasets[rows] = write_rows(self.tmp / f"rows-{rows}.jsonl", rows)
        return self.datasets[rows]

    def client(self, stack: str, args: list[str]) -> tuple[float, float, int]:
        """Wall seconds, user+sys CPU seconds and the exit code of one ``ragbatch`` process."""
        if stack == FLOOR_STACK:
            return self.process([str(FLOOR), *args], {})
        prelude = NO_SNIFFIO if self.without_sniffio else ""
        entry = ["-c", prelude + LAUNCH] if prelude else ["-m", "ragbatch"]
        return self.process([*entry, "run", *args], self.pythonpath(stack))

    def pythonpath(self, stack: str) -> dict[str, str]:
        """The stack's package first, then whatever PYTHONPATH already names (its libraries)."""
        rest = os.environ.get("PYTHONPATH")
        return {"PYTHONPATH": os.pathsep.join([str(self.stacks[stack]), *([rest] if rest else [])])}

    def env(self, extra: dict[str, str]) -> dict[str, str]:
        """Every client writes and reads its bytecode in one cache under the bench's temporary
        directory, as an installed package has its ``.pyc`` files: with
        ``PYTHONDONTWRITEBYTECODE`` set (as some shells and CI images do) each run would
        compile the stack's sources again and count it as start-up."""
        env = {**os.environ, **extra, "PYTHONPYCACHEPREFIX": str(self.tmp / "pycache")}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        return env

    def process(self, argv: list[str], env: dict[str, str]) -> tuple[float, float, int]:
        """Wall seconds, cost (user+sys CPU seconds, or G instructions) and exit code."""
        command = [sys.executable, *argv]
        if self.instructions:
            out = f"--callgrind-out-file={self.tmp / 'callgrind.out'}"
            command = ["valgrind", "--tool=callgrind", out, *command]
        started = time.perf_counter()
        # A neutral working directory: with ``-m`` the current one comes first on sys.path.
        stderr = subprocess.PIPE if self.instructions else None
        process = subprocess.Popen(command, env=self.env(env), cwd=self.tmp / "cwd", stderr=stderr)
        err = process.stderr.read() if process.stderr is not None else b""
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - started
        process.returncode = os.waitstatus_to_exitcode(status)
        if not self.instructions:
            return wall, usage.ru_utime + usage.ru_stime, process.returncode
        # valgrind's lines start with ==pid==; the client's own go on to this stderr
        sys.stderr.buffer.write(
            b"".join(line for line in err.splitlines(True) if line[:2] != b"==")
        )
        found = COLLECTED.search(err)
        if found is None:
            raise SystemExit(f"no instruction count from valgrind for {argv[:3]}")
        return wall, int(found.group(1)) / 1e9, process.returncode

    def template(self, rows: int) -> Path:
        """The model and questions ragbatch sends for the bench rows, from its own
        ``build_request``; checks that the floor's bodies are byte-identical to ragbatch's."""
        path = self.tmp / f"template-{rows}.json"
        if path.exists():
            return path
        code = CAPTURE.format(
            floor_dir=str(FLOOR.parent), dataset=str(self.dataset(rows)), model=MODEL,
            out=str(path),
        )  # fmt: skip
        subprocess.run(
            [sys.executable, "-c", code], env={**os.environ, **self.pythonpath("this")},
            cwd=self.tmp / "cwd", check=True,
        )  # fmt: skip
        return path

    def origin(self, stack: str) -> str:
        """Where a client process of ``stack`` imports ragbatch from (printed as a check)."""
        env = {**os.environ, **self.pythonpath(stack)}
        if stack == FLOOR_STACK:
            return str(FLOOR)
        code = "import ragbatch; print(ragbatch.__file__)"
        return subprocess.run(
            [sys.executable, "-c", code], env=env, cwd=self.tmp / "cwd",
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip

    def run(
        self,
        stack: str,
        concurrency: int,
        latency_ms: float,
        rows: int,
        offline: bool = False,
        repetition: int = 0,
    ) -> Run:
        server = self.server(latency_ms)
        tag = f"{stack}-{concurrency}-{latency_ms:g}-{rows}-{repetition}"
        record = self.tmp / f"record-{tag}{'-offline' if offline else ''}.json"
        cache = self.tmp / tag
        if stack == FLOOR_STACK:
            out = str(self.tmp / "floor-rows.jsonl")
            if offline:
                replayed = self.tmp / f"{self.replayed}-{concurrency}-{latency_ms:g}-{rows}-0"
                args = ["replay", str(replayed)]
            else:
                args = [
                    "live", str(self.dataset(rows)), str(self.template(rows)), server.url, KEY,
                    str(concurrency),
                ]  # fmt: skip
            args += [out, str(record)]
        else:
            args = [
                str(self.dataset(rows)), "--provider", "jev", "--model", MODEL,
                "--base-url", server.url, "--api-key", KEY,
                *(["--no-cache"] if stack == NO_CACHE_STACK else ["--cache-dir", str(cache)]),
                "--concurrency", str(concurrency), "--out", str(self.tmp / "report.json"),
                "--run-record", str(record), "--quiet",
                "--pricing", str(ROOT / "pricing/typesafe-2026-12.json"),
                *(["--offline"] if offline else []),
            ]  # fmt: skip
        server.stats()
        server_before = server.cpu_s()
        owner = self.another_owner(cache) if stack == SHARED_STACK and not offline else None
        try:
            wall, cpu, code = self.client(stack, args)
        finally:
            if owner is not None:
                owner.communicate("", timeout=30)
        server_cpu = server.cpu_s() - server_before
        seen = server.stats()
        if code != 0:
            raise SystemExit(f"{stack} exited {code} (concurrency {concurrency})")
        data = orjson.loads(record.read_bytes())
        assert data["rows"] == rows, data["rows"]
        return Run(
            stack="replay " + stack if offline else stack,
            concurrency=concurrency,
            latency_ms=latency_ms,
            rows=rows,
            wall_s=wall,
            cpu_s=cpu,
            run_rate=data["rowsPerSecond"],
            peak_client=data.get("rateControl", {}).get("peakInFlight", 0),
            peak_server=seen["maxInFlight"],
            server_cpu_ms=server_cpu / max(seen["requests"], 1) * 1000,
        )

    def another_owner(self, cache: Path) -> subprocess.Popen[str]:
        """A process that holds a lease in ``cache`` until its stdin closes (started, holding)."""
        owner = subprocess.Popen(
            [sys.executable, "-c", ANOTHER_OWNER, str(cache)], env=self.env(self.pythonpath("this")),
            cwd=self.tmp / "cwd", stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert owner.stdout is not None and owner.stdout.readline() == "holding\n"
        return owner

    def startup(self, stack: str, latency_ms: float) -> float:
        """CPU seconds of a one-row run (imports, set-up and one call), after an unmeasured
        one that fills the bytecode cache."""
        self.run(stack, 1, latency_ms, 1, repetition=-1)  # its own cache: not a replay
        return self.run(stack, 1, latency_ms, 1).cpu_s

    def close(self) -> None:
        for server in self.servers.values():
            server.stop()


def archive(rev: str, into: Path) -> Path:
    """The ``ragbatch`` package as it was at git revision ``rev``."""
    into.mkdir()
    tar = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev, "ragbatch"], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=tar, check=True)
    return into


def medians(paired: dict[tuple[int, float, int], list[dict[str, Run]]], reference: str) -> str:
    """Median ratios over the repetitions: each stack to the floor, and ``this`` to the
    reference, each ratio taken within one repetition (the same moment's load)."""
    lines = ["medians over the repetitions (ratios within each repetition):"]
    for (concurrency, latency, rows), runs in paired.items():
        lines.append(f"{concurrency} in flight, {latency:g} ms, {rows} rows:")
        pairs = [(n, FLOOR_STACK) for n in runs[0] if n != FLOOR_STACK]
        if reference:
            pairs.append(("this", reference))
        for mine, theirs in pairs:
            cpu = statistics.median(r[mine].cpu_s / r[theirs].cpu_s for r in runs)
            rate = statistics.median(r[mine].run_rate / r[theirs].run_rate for r in runs)
            spread = ", ".join(f"{r[mine].run_rate / r[theirs].run_rate:.2f}" for r in runs)
            lines.append(
                f"  {mine} / {theirs}: {COST.name} a row {cpu:.2f}x, rows/s {rate:.2f}x ({spread})"
            )
    return "\n".join(lines)


def parse_case(text: str) -> tuple[int, float, int]:
    concurrency, latency, rows = text.split(":")
    return int(concurrency), float(latency), int(rows)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--concurrency", default="32,64,128,256,512")
    parser.add_argument("--latency-ms", type=float, default=250)
    parser.add_argument("--rows", type=int, default=8000)
    parser.add_argument("--waves", type=int, default=None, help="32 (4 with --instructions)")
    parser.add_argument("--case", action="append", type=parse_case)
    parser.add_argument("--reference", metavar="REV")
    parser.add_argument("--without-sniffio", action="store_true")
    parser.add_argument("--no-replay", action="store_true")
    parser.add_argument("--no-cache-stack", action="store_true", help="also this --no-cache")
    parser.add_argument(
        "--shared-stack", action="store_true", help="also this beside another process's lease"
    )
    parser.add_argument("--repeat", type=int, default=1, help="repetitions, order rotated")
    parser.add_argument(
        "--instructions", action="store_true", help="count instructions (valgrind) for CPU"
    )
    parser.add_argument("--slowdown", type=float, default=40.0, help="latency x under valgrind")
    args = parser.parse_args()
    if args.serve:
        asyncio.run(serve(args.latency_ms / 1000))
        return
    sweep = [int(c) for c in args.concurrency.split(",") if c]
    # Under valgrind a row costs ~40x: smaller defaults (a whole default sweep took hours).
    waves = args.waves if args.waves is not None else 4 if args.instructions else 32
    cases = [(c, args.latency_ms, min(args.rows, waves * c)) for c in sweep]
    default_case = (32, 200.0, 320 if args.instructions else 3200)
    extra = args.case if args.case is not None else [default_case]
    # A case the sweep already runs would run again on its warm cache (a replay): once.
    cases += [case for case in extra if case not in cases]
    if args.instructions:
        if shutil.which("valgrind") is None:
            raise SystemExit("--instructions needs valgrind on PATH")
        global COST
        COST = INSTRUCTIONS
        cases = [(c, latency * args.slowdown, rows) for c, latency, rows in cases]
        print(f"instructions counted by callgrind; latencies x{args.slowdown:g} (--slowdown)")
    print(
        f"os.cpu_count() {os.cpu_count()}; load average before {os.getloadavg()[0]:.2f}; "
        f"python {sys.version.split()[0]}; sniffio {'hidden' if args.without_sniffio else 'as installed'}"
    )
    with tempfile.TemporaryDirectory(prefix="bench-ceiling-") as tmp_name:
        tmp = Path(tmp_name)
        stacks = {FLOOR_STACK: FLOOR, "this": ROOT}
        if args.reference and Path(args.reference).is_dir():  # a package tree already there
            stacks[Path(args.reference).name] = Path(args.reference).resolve()
            args.reference = Path(args.reference).name
        elif args.reference:
            stacks[args.reference] = archive(args.reference, tmp / "reference")
        if args.no_cache_stack:
            stacks[NO_CACHE_STACK] = ROOT
        if args.shared_stack:
            stacks[SHARED_STACK] = ROOT
        bench = Bench(tmp, stacks, args.without_sniffio, args.instructions)
        for name in stacks:
            print(f"stack {name}: {bench.origin(name)}")
        try:
            startup = {name: bench.startup(name, cases[0][1]) for name in stacks}
            print(
                f"start-up {COST.name} (a one-row run): "
                + ", ".join(
                    f"{name} {cpu:.2f} {COST.whole} ({cpu / startup[FLOOR_STACK]:.2f}x the floor)"
                    for name, cpu in startup.items()
                )
            )
            print(header() + (" this vs reference |" if args.reference else ""))
            print("|---" * (11 + bool(args.reference)) + "|")
            versus: list[str] = []
            paired: dict[tuple[int, float, int], list[dict[str, Run]]] = {}
            for repetition in range(args.repeat):
                for concurrency, latency, rows in cases:
                    # each repetition starts with another stack: none always runs first
                    names = list(stacks)
                    turn = repetition % len(names)
                    results = {
                        name: bench.run(name, concurrency, latency, rows, repetition=repetition)
                        for name in names[turn:] + names[:turn]
                    }
                    paired.setdefault((concurrency, latency, rows), []).append(results)
                    for name in stacks:
                        reference = results.get(args.reference) if name == "this" else None
                        print(results[name].line(reference), flush=True)
                    floor = results[FLOOR_STACK]
                    versus += [
                        f"{concurrency} in flight, {latency:g} ms, {rows} rows"
                        f" (repetition {repetition + 1}):",
                        f"  floor: {COST.name} {floor.cpu_s / rows * 1000:.2f} {COST.per_row}, "
                        f"marginal {floor.marginal_ms(startup[FLOOR_STACK]):.2f} {COST.per_row}, "
                        f"{floor.run_rate / floor.ideal:.2f} of ideal",
                    ]
                    versus += [
                        results[n].versus(floor, startup) for n in stacks if n != FLOOR_STACK
                    ]
            if args.repeat > 1:
                versus.append(medians(paired, args.reference))
            if not args.no_replay and 256 in sweep:
                rows = min(args.rows, waves * 256)
                replays = {
                    name: bench.run(name, 256, args.latency_ms, rows, offline=True)
                    for name in stacks
                    if name not in (NO_CACHE_STACK, SHARED_STACK)  # nothing new to replay
                }
                for result in replays.values():
                    print(result.line(None))
                floor = replays[FLOOR_STACK]
                versus.append(f"warm replay, {rows} rows (the floor reads this stack's cache):")
                versus += [r.versus(floor, {}) for n, r in replays.items() if n != FLOOR_STACK]
            print("\nratios to the floor (same run):")
            print("\n".join(versus))
        finally:
            bench.close()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(
        f"load average after {os.getloadavg()[0]:.2f}; this script's own CPU "
        f"{usage.ru_utime + usage.ru_stime:.1f} s"
    )


if __name__ == "__main__":
    main()
