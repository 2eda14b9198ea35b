"""Multi-step traces keep a run's guarantees (docs/semantics.md §8, §5): the same report bytes
at any concurrency, over workers, shards and a replay; a step shared by two traces paid once;
a killed run resumed without paying a step twice; ``estimate`` and ``--max-cost`` counting
every step's request. (Dask: tests/run/test_traces_dask.py.)

The traces are made here: groups of traces share their first turn (the same question, hop
and answer, so the same requests), and each trace's second turn is its own.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from typer.testing import CliRunner

from ragbatch.cli._app import app
from ragbatch.core import Trace, step_requests
from ragbatch.providers.cache._replies import ReplyCache
from ragbatch.run import _workers as worker_processes
from ragbatch.testing import JevServer, canonical_json
from tests.conftest import JEV_KEY
from tests.run.test_resume import StartServer, comparable, wait_for

ROOT = Path(__file__).resolve().parents[2]
PRICING = str(ROOT / "pricing/typesafe-2026-12.json")
TRACES = ROOT / "datasets/traces.jsonl"
MODEL = "jev-1.13.0"
ENV = {"TYPESAFE_API_KEY": JEV_KEY}
GROUPS = 4


def trace_line(n: int) -> dict[str, Any]:
    """Trace ``n``: the first turn of its group (n mod GROUPS), then a turn of its own with a
    tool call; every third one has a reference answer."""
    g = n % GROUPS
    steps: list[dict[str, Any]] = [
        {"kind": "user", "text": f"What does plan {g} include?"},
        {
            "kind": "retrieval",
            "query": f"plan {g} features",
            "contexts": [
                {"id": f"plan-{g}", "text": f"Plan {g} includes SSO and {g + 2} projects."},
                {"id": "faq", "text": "Every plan can be cancelled at any time."},
            ],
        },
        {"kind": "answer", "text": f"Plan {g} includes SSO and {g + 2} projects."},
        {"kind": "user", "text": f"And how much is it for {n + 3} seats?"},
        {"kind": "tool", "name": "calculator", "input": {"seats": n + 3}, "output": n * 7},
        {
            "kind": "retrieval",
            "query": f"plan {g} price for {n + 3} seats",
            "contexts": [{"id": f"price-{n}", "text": f"{n + 3} seats cost ${n * 7} a month."}],
        },
        {"kind": "answer", "text": f"It costs ${n * 7} a month."},
    ]
    line: dict[str, Any] = {"id": f"trace-{n:03d}", "steps": steps}
    if n % 3 == 0:
        line["referenceAnswer"] = f"${n * 7} a month."
    return line


def write_traces(path: Path, count: int) -> list[Trace]:
    lines = [orjson.dumps(trace_line(n)) for n in range(count)]
    path.write_bytes(b"\n".join(lines) + b"\n")
    return [Trace.model_validate_json(line) for line in lines]


def judged_steps(traces: list[Trace]) -> int:
    return sum(len(step_requests(t, MODEL)) for t in traces)


def distinct_steps(traces: list[Trace]) -> int:
    asked = (a.request.body() for t in traces for a in step_requests(t, MODEL))
    return len({canonical_json(orjson.loads(body)) for body in asked})


def sent_bodies(server: JevServer) -> list[str]:
    return [canonical_json(body) for body in server.bodies]


def cli(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args), env=env)
    return result.exit_code, result.stdout + result.stderr


def run(dataset: Path, out: Path, *extra: str, env: dict[str, str] | None = None) -> None:
    """``ragbatch run`` writing the report, --rows-out and both views beside ``out``."""
    code, text = cli(
        "run", str(dataset), "--pricing", PRICING, "--quiet", "--out", str(out),
        "--rows-out", str(out.with_suffix(".jsonl")), "--html", str(out.with_suffix(".html")),
        "--markdown", str(out.with_suffix(".md")), *extra, env=env,
    )  # fmt: skip
    assert code == 0, text


def live(server: JevServer, cache: Path, *extra: str) -> tuple[str, ...]:
    return (
        "--provider", "jev", "--base-url", server.base_url, "--model", MODEL,
        "--cache-dir", str(cache), *extra,
    )  # fmt: skip


def same_outputs(a: Path, b: Path) -> None:
    for suffix in (".json", ".jsonl", ".html", ".md"):
        assert a.with_suffix(suffix).read_bytes() == b.with_suffix(suffix).read_bytes(), suffix


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    """The synthetic traces, then the committed labelled ones (a trace decided by an earlier
    turn than its last is among them)."""
    path = tmp_path / "traces.jsonl"
    write_traces(path, 24)
    path.write_bytes(path.read_bytes() + TRACES.read_bytes())
    return path


def test_the_report_and_views_are_the_same_at_any_concurrency(
    dataset: Path, tmp_path: Path
) -> None:
    run(dataset, tmp_path / "c32.json", "--concurrency", "32")
    run(dataset, tmp_path / "c1.json", "--concurrency", "1")
    same_outputs(tmp_path / "c32.json", tmp_path / "c1.json")
    rows = orjson.loads((tmp_path / "c1.json").read_bytes())["rows"]
    assert len(rows) == 32 and all("steps" in row for row in rows)


@pytest.mark.parametrize("workers", [2, 3])
def test_workers_write_the_single_process_outputs(
    dataset: Path, tmp_path: Path, workers: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the HTML view shows each trace's deciding turn, which only the judged trace knows
    monkeypatch.setattr(worker_processes, "available_cores", lambda: 8)
    run(dataset, tmp_path / "single.json")
    run(dataset, tmp_path / "multi.json", "--workers", str(workers))
    same_outputs(tmp_path / "single.json", tmp_path / "multi.json")
    html = (tmp_path / "multi.html").read_text()
    # second-answer-contradicts is decided by its second turn's answer, not its last turn's:
    # the rows table shows that turn's question (the timeline shows every turn's, once)
    assert html.count("Could I get store credit instead?") == 2 and html.count("Thanks!") == 1


def test_shards_merge_to_the_single_run(dataset: Path, tmp_path: Path) -> None:
    run(dataset, tmp_path / "single.json")
    parts = []
    for k in (1, 2, 3):
        part = tmp_path / f"p{k}.jsonl"
        code, text = cli(
            "run", str(dataset), "--shard", f"{k}/3", "--partial-out", str(part),
            "--pricing", PRICING, "--quiet",
        )  # fmt: skip
        assert code == 0, text
        parts.append(str(part))
    merged = tmp_path / "merged.json"
    code, text = cli("merge", *reversed(parts), "--out", str(merged))
    assert code == 0, text
    assert merged.read_bytes() == (tmp_path / "single.json").read_bytes()


def test_live_then_replay_gives_the_same_bytes_and_pays_each_shared_step_once(
    start_jev_server: StartServer, dataset: Path, tmp_path: Path
) -> None:
    server = start_jev_server()
    traces = [Trace.model_validate_json(line) for line in dataset.read_bytes().splitlines()]
    cache = tmp_path / "cache"
    run(dataset, tmp_path / "live.json", *live(server, cache, "--concurrency", "32"), env=ENV)
    sent = sent_bodies(server)
    # a first turn shared by a group of traces is asked once, however many ask it at once
    assert len(sent) == len(set(sent)) == distinct_steps(traces) < judged_steps(traces)
    run(dataset, tmp_path / "replay.json", *live(server, cache, "--offline", "--concurrency", "1"))
    same_outputs(tmp_path / "live.json", tmp_path / "replay.json")
    assert server.requests_total == len(sent)


def test_live_workers_pay_each_step_once_and_replay_to_the_same_bytes(
    start_jev_server: StartServer, dataset: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(worker_processes, "available_cores", lambda: 8)
    server = start_jev_server()
    traces = [Trace.model_validate_json(line) for line in dataset.read_bytes().splitlines()]
    cache = tmp_path / "cache"
    flags = live(server, cache, "--workers", "3", "--concurrency", "8")
    run(dataset, tmp_path / "live.json", *flags, env=ENV)
    sent = sent_bodies(server)
    assert len(sent) == len(set(sent)) == distinct_steps(traces)
    run(dataset, tmp_path / "replay.json", *live(server, cache, "--offline"))
    same_outputs(tmp_path / "live.json", tmp_path / "replay.json")


def estimate(dataset: Path, cache: Path) -> dict[str, Any]:
    code, text = cli(
        "estimate", str(dataset), "--provider", "jev", "--model", MODEL, "--cache-dir",
        str(cache), "--pricing", PRICING, "--json",
    )  # fmt: skip
    assert code == 0, text
    data: dict[str, Any] = orjson.loads(text)
    return data


def test_estimate_counts_a_request_per_judged_step_and_none_once_cached(
    start_jev_server: StartServer, dataset: Path, tmp_path: Path
) -> None:
    traces = [Trace.model_validate_json(line) for line in dataset.read_bytes().splitlines()]
    cache = tmp_path / "cache"
    cold = estimate(dataset, cache)
    assert (cold["rows"], cold["calls"], cold["cacheHits"]) == (32, judged_steps(traces), 0)
    assert cold["inputTokens"] > 0
    server = start_jev_server()
    run(dataset, tmp_path / "r.json", *live(server, cache), env=ENV)
    warm = estimate(dataset, cache)
    assert (warm["calls"], warm["cacheHits"]) == (judged_steps(traces), judged_steps(traces))
    assert (warm["inputTokens"], warm["costUsd"]) == (0, 0)
    # the estimator against what the server billed, over every step's request
    assert warm["accuracy"]["comparedCalls"] == judged_steps(traces)


def long_trace(n: int, hops: int) -> dict[str, Any]:
    """One turn of ``hops`` hops: a budget can run out between two of its steps."""
    steps: list[dict[str, Any]] = [{"kind": "user", "text": f"Summarise chapter {n}."}]
    for h in range(hops):
        text = f"Chapter {n}, section {h}: " + "the plan covers many things " * 8
        steps.append(
            {
                "kind": "retrieval",
                "query": f"chapter {n} section {h}",
                "contexts": [{"id": f"c{n}-{h}", "text": text}],
            }
        )
    steps.append({"kind": "answer", "text": f"Chapter {n} covers the plan."})
    return {"id": f"long-{n}", "steps": steps}


def test_max_cost_stops_between_steps_and_a_rerun_completes_the_trace(
    start_jev_server: StartServer, tmp_path: Path
) -> None:
    dataset = tmp_path / "long.jsonl"
    dataset.write_bytes(b"".join(orjson.dumps(long_trace(n, 8)) + b"\n" for n in range(2)))
    traces = [Trace.model_validate_json(line) for line in dataset.read_bytes().splitlines()]
    cache, budget = tmp_path / "cache", estimate(dataset, tmp_path / "cache")["costUsd"] * 0.3
    server = start_jev_server()
    code, text = cli(
        "run", str(dataset), "--pricing", PRICING, "--quiet", "--out", str(tmp_path / "part.json"),
        *live(server, cache, "--concurrency", "1", "--max-cost", f"{budget:.9f}"), env=ENV,
    )  # fmt: skip
    assert code == 5, text
    partial = orjson.loads((tmp_path / "part.json").read_bytes())
    assert partial["modes"]["jevOnly"]["cost"]["usd"] <= budget
    first, second = partial["rows"]
    # the budget ran out inside the first trace: the steps judged before it are kept
    assert first["status"] == "failed" and first["error"]["kind"] == "budget-exhausted"
    stopped = int(first["error"]["message"].removeprefix("step ").split(" ")[0])
    assert 1 < stopped < len(traces[0].steps) - 1
    assert all(s["retrieval"] for s in first["steps"][1:stopped])
    assert all("retrieval" not in s for s in first["steps"][stopped:])
    assert second["error"]["kind"] == "budget-exhausted"
    assert partial["incomplete"]["rowsNotEvaluated"] == 2
    paid = server.successful
    assert paid == stopped - 1  # nothing was sent past the budget

    code, text = cli(
        "run", str(dataset), "--pricing", PRICING, "--quiet", "--out", str(tmp_path / "full.json"),
        *live(server, cache, "--max-cost", "1"), env=ENV,
    )  # fmt: skip
    assert code == 0, text
    sent = sent_bodies(server)
    assert len(sent) == len(set(sent)) == judged_steps(traces)  # no step paid twice
    fresh = start_jev_server()
    code, text = cli(
        "run", str(dataset), "--pricing", PRICING, "--quiet", "--out", str(tmp_path / "fresh.json"),
        *live(fresh, tmp_path / "fresh-cache"), env=ENV,
    )  # fmt: skip
    assert code == 0, text
    resumed = orjson.loads((tmp_path / "full.json").read_bytes())
    assert comparable(resumed) == comparable(orjson.loads((tmp_path / "fresh.json").read_bytes()))


def test_a_killed_run_resumes_without_paying_a_step_twice(
    start_jev_server: StartServer, tmp_path: Path
) -> None:
    server = start_jev_server(latency_s=0.03)
    dataset = tmp_path / "traces.jsonl"
    traces = write_traces(dataset, 40)
    distinct, concurrency = distinct_steps(traces), 4
    out = tmp_path / "report.json"
    command = [
        sys.executable, "-m", "ragbatch", "run", str(dataset), "--pricing", PRICING, "--quiet",
        "--out", str(out), *live(server, tmp_path / "cache", "--concurrency", str(concurrency)),
    ]  # fmt: skip
    env = {**os.environ, **ENV}
    proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL)
    try:
        wait_for(lambda: server.successful >= distinct // 2, proc, limit_s=30)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL and not out.exists()
    settled = time.monotonic() + 30
    while server.in_flight and time.monotonic() < settled:  # replies still being written to
        time.sleep(0.005)  # the dead client get counted before the counts are read
    answered = server.successful
    cache = ReplyCache(tmp_path / "cache")
    cached = len(cache)
    cache.close()
    assert distinct // 2 - concurrency <= cached < distinct
    assert answered - cached <= concurrency  # only the steps in flight were lost

    rerun = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, timeout=60)
    assert rerun.returncode == 0, rerun.stderr.decode()
    sent = sent_bodies(server)
    # every step is asked once, but for those in flight at the kill (answered, never stored)
    assert len(set(sent)) == distinct
    assert len(sent) - distinct == answered - cached
    report = orjson.loads(out.read_bytes())
    assert [r["id"] for r in report["rows"]] == [t.id for t in traces]
    assert all(r["status"] == "ok" for r in report["rows"])
