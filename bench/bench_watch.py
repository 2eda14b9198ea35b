"""``ragbatch watch`` against a real Phoenix: how long from a trace going idle to its verdict
stored, and exactly once under ``kill -9`` and a Phoenix outage.

Everything is real and on loopback: a Phoenix server (``phoenix serve``, a temporary working
directory), an instrumented RAG application sending OpenInference traces over OTLP
(:mod:`ragbatch.testing.otlp_app`), the loopback Jev server with a scripted latency, and
``ragbatch watch`` as a separate process (``--provider jev``, the reply cache, the live client).

**Latency** (the default): ``--traces`` at ``--rate`` a second; for every trace, from the
moment it went idle (its last span's end + ``--idle-s``) to the moment Phoenix answered that
it stored the trace's annotations (the watcher's state file records both, on this machine's
clock), and from the moment it became *judgeable*: idle, and a span that ended ``--idle-s``
after it listed by Phoenix (a thread polls the listing every 0.1 s and notes when each span
first shows). Phoenix inserts what it receives in the background, at most 100 spans a
transaction, so at a high rate on a small machine spans are listed seconds after they end,
and no watcher can judge a trace before the spans that show it complete are listed. Printed:
p50, p95 and max of both and of Phoenix's listing delay (the root span's), against the bound
``--interval-s`` + the judge's latency + 1 s, the judge's latency being the longest a trace's
judging takes (its calls one after another at ``--judge-ms`` each: several for a multi-step
trace).

**Proof** (``--kills K --outage-s S``): the watcher is killed with SIGKILL at K random moments
(every other one the first moment after that when a judge call is in flight) and started
again at once, and Phoenix is stopped for S seconds between the two halves of the
traffic. Then: every trace's root span holds exactly one ``ragbatch`` annotation and no span
two of one name; the judge calls answered more than once are at most K x ``--concurrency``
(the calls in flight at each kill); a watcher said Phoenix was down, and none ended but by a
kill (the loop resumed by itself: the one that saw Phoenix go may be killed before it saw it
back, so "Phoenix answers again" is printed as information); SIGTERM ends it with exit 0.

Run: ``python -m bench.bench_watch --traces 500 --rate 50`` (latency, about 30 s after
Phoenix's start) and ``python -m bench.bench_watch --traces 500 --rate 8.4 --kills 10
--outage-s 30`` (proof: 500 traces over a minute, about 2 minutes).
"""

from __future__ import annotations

import argparse
import bisect
import random
import re
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from ragbatch.testing import JevServer
from ragbatch.testing.otlp_app import RagApp, SentTrace
from ragbatch.testing.phoenix import PhoenixError, PhoenixServer

KEY = "bench-key"


def watch_argv(url: str, project: str, tmp: Path, *extra: str) -> list[str]:
    """``ragbatch watch`` for ``project`` as a separate process, its files under ``tmp``."""
    return [
        sys.executable, "-m", "ragbatch", "watch", "--phoenix", url, "--project", project,
        "--cache-dir", str(tmp / "cache"), "--report-dir", str(tmp / "reports"), *extra,
    ]  # fmt: skip


def live_argv(jev: JevServer, *, idle_s: float, interval_s: float, concurrency: int) -> list[str]:
    return [
        "--provider", "jev", "--model", "jev-1.13.0", "--base-url", jev.base_url,
        "--api-key", KEY, "--since",
        "2000-01-01", "--idle-s", str(idle_s), "--interval-s", str(interval_s),
        "--concurrency", str(concurrency), "--report-every", "1d",
    ]  # fmt: skip


def problems(phoenix: PhoenixServer, project: str, traces: list[SentTrace]) -> list[str]:
    """What breaks "every trace's verdict stored exactly once" (empty: nothing)."""
    found = phoenix.span_annotations(project, [s for t in traces for s in t.span_ids])
    counts = Counter((a["span_id"], a["name"]) for a in found)
    out = [f"{span} has {n} {name!r} annotations" for (span, name), n in counts.items() if n > 1]
    missing = [t for t in traces if counts[(t.root_span_id, "ragbatch")] == 0]
    if missing:
        out.append(f"{len(missing)} traces have no verdict (first: {missing[0].trace_id})")
    return out


def wait_stored(
    phoenix: PhoenixServer, project: str, traces: list[SentTrace], timeout_s: float
) -> list[str]:
    """Poll until every trace's verdict is stored (or the time is up); the problems left."""
    deadline = time.monotonic() + timeout_s
    while True:
        left = problems(phoenix, project, traces)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.5)  # polling a remote store: nothing to wait on


@dataclass
class Watchers:
    """The watcher process, started again after each kill; what all of them printed."""

    argv: list[str]
    log: Path
    kills: int = 0
    proc: subprocess.Popen[bytes] | None = None
    logs: list[Path] = field(default_factory=list)
    gave_up: list[int] = field(default_factory=list)  # exit codes of watchers that ended

    def start(self) -> None:
        path = self.log.with_name(f"{self.log.stem}-{len(self.logs)}.log")
        self.logs.append(path)
        with path.open("wb") as out:
            self.proc = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT)

    def kill(self) -> None:
        assert self.proc is not None
        if self.proc.poll() is not None:  # it ended by itself: it gave up, nobody killed it
            self.gave_up.append(self.proc.returncode)
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self.kills += 1
        self.start()

    def stop(self) -> int:
        """SIGTERM; the exit code."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(120)

    def output(self) -> str:
        return "".join(f"== watcher {n} ==\n{p.read_text(errors='replace')}"
                       for n, p in enumerate(self.logs))  # fmt: skip


def send_in_halves(
    phoenix: PhoenixServer,
    project: str,
    seed: int,
    traces: int,
    rate: float,
    outage_s: float,
    sent: list[SentTrace],
    said: Callable[[str], None],
) -> None:
    """The application: half the traffic, Phoenix stopped ``outage_s`` (the app holds its
    traces meanwhile, as a buffering exporter would), the other half."""
    with RagApp(phoenix.url, project, seed) as app:
        sent.extend(app.send(traces // 2, rate))
        app.flush()
        if outage_s > 0:
            phoenix.stop()
            said(f"Phoenix stopped for {outage_s:g} s")
            time.sleep(outage_s)  # the outage itself
            phoenix.start()
            said("Phoenix started again")
        sent.extend(app.send(traces - traces // 2, rate))
        app.flush()


def prove(
    phoenix: PhoenixServer,
    project: str,
    tmp: Path,
    *,
    traces: int,
    rate: float,
    kills: int,
    outage_s: float,
    seed: int = 0,
    concurrency: int = 8,
    idle_s: float = 1.0,
    interval_s: float = 0.5,
    say: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Kills and an outage while traffic flows; what was found (``problems`` empty: exactly
    once held)."""
    rng = random.Random(seed)
    with JevServer(api_key=KEY, latency_s=0.02) as jev:
        argv = watch_argv(phoenix.url, project, tmp,
                          *live_argv(jev, idle_s=idle_s, interval_s=interval_s,
                                     concurrency=concurrency))  # fmt: skip
        watchers = Watchers(argv, tmp / "watch.log")
        sent: list[SentTrace] = []
        app = threading.Thread(
            target=send_in_halves,
            args=(phoenix, project, seed, traces, rate, outage_s, sent, say),
        )
        span = traces / rate + outage_s
        moments = sorted(rng.uniform(0.3, span) for _ in range(kills))
        began = time.monotonic()
        watchers.start()
        app.start()
        for k, moment in enumerate(moments):
            while time.monotonic() - began < moment:
                time.sleep(0.05)  # the random moment of the kill
            # every other kill waits for a judge call in flight: the worst moment for cost
            while k % 2 and jev.in_flight == 0 and time.monotonic() - began < span + 5:
                time.sleep(0.005)
            watchers.kill()
        app.join()
        left = wait_stored(phoenix, project, sent, timeout_s=120)
        code = watchers.stop()
        bodies = Counter(orjson.dumps(b, option=orjson.OPT_SORT_KEYS) for b in jev.bodies)
        answered_twice = sum(n - 1 for n in bodies.values())
    output = watchers.output()
    return {
        "traces": len(sent),
        "kills": watchers.kills,
        "problems": left,
        "exit": code,
        "calls": sum(bodies.values()),
        "distinctCalls": len(bodies),
        "answeredTwice": answered_twice,
        "answeredTwiceBound": watchers.kills * concurrency,
        # the loop resumed by itself: no watcher ended on its own (only the kills ended them)
        "gaveUp": watchers.gave_up,
        "outageSaid": "trying again with backoff" in output,
        # the watcher that saw the outage may be killed before it saw Phoenix back
        "phoenixBackSaid": "Phoenix answers again" in output,
        "output": output,
    }


class Visibility:
    """When each span first showed in Phoenix's span listing: a thread polling
    ``GET /v1/projects/{project}/spans`` past its own cursor every ``every_s``."""

    def __init__(self, phoenix: PhoenixServer, project: str, every_s: float = 0.1) -> None:
        self.phoenix, self.project, self.every_s = phoenix, project, every_s
        self.seen: dict[str, float] = {}  # root span id -> when first listed
        self.listed: list[tuple[float, float]] = []  # every span: (its end, when first listed)
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        path = f"/v1/projects/{self.project}/spans"
        cursor: str | None = None
        while not self.done.is_set():
            params = [("sort", "id"), ("order", "asc"), ("limit", "1000")]
            try:
                page = self.phoenix.get_json(
                    path, params + ([("cursor", cursor)] if cursor else [])
                )
            except PhoenixError:  # the project does not exist yet
                page = {"data": [], "next_cursor": None}
            now = time.time()
            for span in page["data"]:
                if span.get("parent_id") is None:
                    self.seen.setdefault(span["context"]["span_id"], now)
                ended = datetime.fromisoformat(span["end_time"]).timestamp()
                self.listed.append((ended, now))
                cursor = span["id"]
            if page.get("next_cursor") is None:
                self.done.wait(self.every_s)

    def judgeable(self, idle_s: float) -> Callable[[float], float]:
        """When a trace that ended at ``end`` could first be judged: once it was idle and a
        span that ended ``idle_s`` after it was listed (or, at the end of the traffic, the
        last listing plus ``idle_s`` of quiet)."""
        ordered = sorted(self.listed)
        ends = [end for end, _ in ordered]
        earliest = [0.0] * len(ordered)  # the earliest listing among spans ending at or after
        running = float("inf")
        for i in range(len(ordered) - 1, -1, -1):
            running = min(running, ordered[i][1])
            earliest[i] = running
        quiet = max((listed for _, listed in ordered), default=0.0) + idle_s

        def at(end: float) -> float:
            i = bisect.bisect_left(ends, end + idle_s)
            return max(end + idle_s, earliest[i] if i < len(ordered) else quiet)

        return at

    def __enter__(self) -> Visibility:
        self.thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.done.set()
        self.thread.join()


def stored_times(state_dir: Path) -> dict[str, tuple[float, float]]:
    """Each trace's (last span's end, annotations stored), from the watcher's state file."""
    (path,) = (state_dir / "watch").glob("*.sqlite")
    with sqlite3.connect(path) as db:
        rows = db.execute(
            "SELECT trace_id, activity, stored_at FROM traces WHERE stored_at IS NOT NULL"
        ).fetchall()
    return {str(t): (float(a), float(s)) for t, a, s in rows}


def quantiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "p50": statistics.median(ordered),
        "p95": ordered[int(0.95 * (len(ordered) - 1))],
        "max": ordered[-1],
    }


def latency(
    phoenix: PhoenixServer,
    project: str,
    tmp: Path,
    *,
    traces: int,
    rate: float,
    judge_ms: float,
    idle_s: float,
    interval_s: float,
    concurrency: int = 32,
    seed: int = 0,
) -> dict[str, Any]:
    """Idle-to-stored lag of every trace at ``rate`` traces a second."""
    with JevServer(api_key=KEY, latency_s=judge_ms / 1000) as jev:
        argv = watch_argv(phoenix.url, project, tmp,
                          *live_argv(jev, idle_s=idle_s, interval_s=interval_s,
                                     concurrency=concurrency))  # fmt: skip
        watchers = Watchers(argv, tmp / "watch.log")
        watchers.start()
        with Visibility(phoenix, project) as visible, RagApp(phoenix.url, project, seed) as app:
            began = time.monotonic()
            sent = app.send(traces, rate)
            app.flush()
            sent_s = time.monotonic() - began
            left = wait_stored(phoenix, project, sent, timeout_s=180)
        code = watchers.stop()
    times = stored_times(tmp / "cache")
    from_idle, from_judgeable, ingest = [], [], []
    judgeable = visible.judgeable(idle_s)
    for trace in sent:
        if trace.trace_id not in times or trace.root_span_id not in visible.seen:
            continue
        end, stored = times[trace.trace_id]
        from_idle.append(stored - (end + idle_s))
        from_judgeable.append(stored - judgeable(end))
        ingest.append(visible.seen[trace.root_span_id] - end)
    spans = tmp / "spans.json"
    spans.write_bytes(orjson.dumps(phoenix.spans(project)))
    judge_s = judge_latency_s(spans, jev_ms=judge_ms)
    return {
        "traces": len(sent),
        "sentPerSecond": len(sent) / sent_s,
        "problems": left,
        "exit": code,
        "measured": len(from_judgeable),
        # idle (its last span's end + --idle-s) -> stored: Phoenix's listing delay included
        "lagFromIdle": quantiles(from_idle),
        # judgeable (idle, and Phoenix listed a span that ended --idle-s after it) -> stored:
        # what the watcher adds
        "lagFromJudgeable": quantiles(from_judgeable),
        "phoenixListingDelay": quantiles(ingest),
        "judgeLatencyS": judge_s,
        "bound": interval_s + judge_s + 1.0,
        # the watcher's turns, as it said them: seconds judging and storing a turn
        "turns": turn_times(watchers.output()),
    }


def turn_times(output: str) -> dict[str, Any]:
    said = re.findall(
        r"judged (\d+) traces in ([\d.]+) s, stored (\d+) annotations in ([\d.]+) s", output
    )
    judge = [float(j) for _, j, _, _ in said]
    store = [float(t) for _, _, _, t in said]
    return {
        "count": len(said),
        "judgeSMax": max(judge, default=0.0),
        "judgeSMean": statistics.fmean(judge) if judge else 0.0,
        "storeSMax": max(store, default=0.0),
        "storeSMean": statistics.fmean(store) if store else 0.0,
    }


def judge_latency_s(spans: Path, jev_ms: float) -> float:
    """The longest a trace's judging takes at ``jev_ms`` a call: its sequential calls (a
    multi-step trace asks step after step) from a mock run of the same spans."""
    out = spans.with_suffix(".report.json")
    subprocess.run(
        [sys.executable, "-m", "ragbatch", "run", str(spans), "--format", "openinference",
         "--baseline", "lexical", "--out", str(out), "--quiet"],
        check=True,
    )  # fmt: skip
    rows = orjson.loads(out.read_bytes())["rows"]
    calls = max((row.get("usage") or {}).get("calls", 1) for row in rows)
    return float(calls) * jev_ms / 1000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_watch", description=__doc__)
    parser.add_argument("--traces", type=int, default=500)
    parser.add_argument("--rate", type=float, default=50.0, help="traces a second")
    parser.add_argument("--kills", type=int, default=0, help="SIGKILLs (proof mode)")
    parser.add_argument("--outage-s", type=float, default=0.0, help="Phoenix down (proof mode)")
    parser.add_argument("--judge-ms", type=float, default=200.0, help="Jev's latency a call")
    parser.add_argument("--idle-s", type=float, default=1.0)
    parser.add_argument("--interval-s", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--log", type=Path, help="write what the watchers printed here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp, PhoenixServer() as phoenix:
        project = f"bench-{int(time.time())}"
        if args.kills or args.outage_s:
            found = prove(phoenix, project, Path(tmp), traces=args.traces, rate=args.rate,
                          kills=args.kills, outage_s=args.outage_s, seed=args.seed)  # fmt: skip
            output = found.pop("output")
            if args.log is not None:
                args.log.write_text(output, encoding="utf-8")
            print(orjson.dumps(found, option=orjson.OPT_INDENT_2).decode())
            held = (not found["problems"] and found["exit"] == 0
                    and found["answeredTwice"] <= found["answeredTwiceBound"]
                    and not found["gaveUp"]
                    and (found["outageSaid"] or not args.outage_s))  # fmt: skip
            print(f"exactly once: {'held' if held else 'BROKEN'}")
            return 0 if held else 1
        found = latency(phoenix, project, Path(tmp), traces=args.traces, rate=args.rate,
                        judge_ms=args.judge_ms, idle_s=args.idle_s,
                        interval_s=args.interval_s)  # fmt: skip
        print(orjson.dumps(found, option=orjson.OPT_INDENT_2).decode())
        ratio = found["lagFromJudgeable"]["max"] / found["bound"]
        print(f"max lag from judgeable / bound (interval + judge latency + 1 s) = {ratio:.2f}")
        return 0 if ratio <= 1.0 and not found["problems"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
