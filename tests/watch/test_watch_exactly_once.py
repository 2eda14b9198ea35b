"""Exactly once against a real Phoenix: the watcher killed with SIGKILL at random moments and
Phoenix stopped mid-run, while an instrumented application sends traces over OTLP.

A smaller run of ``python -m bench.bench_watch --kills 10 --outage-s 30`` (500 traces over a
minute; docs/benchmarks.md has its figures): 40 traces, 4 kills (two of them while a judge
call is in flight), Phoenix stopped and started again (about 11 s down).
"""

from __future__ import annotations

import re
import signal
import subprocess
import time
from pathlib import Path

from bench.bench_watch import prove, wait_stored
from ragbatch.testing import JevServer
from ragbatch.testing.otlp_app import RagApp
from ragbatch.testing.phoenix import PhoenixServer
from tests.watch._watching import command, watch_argv


def test_kills_and_a_phoenix_outage_keep_every_verdict_exactly_once(
    restartable: PhoenixServer, phoenix_project: str, tmp_path: Path
) -> None:
    phoenix = restartable
    said: list[str] = []
    # Phoenix's own restart takes about 10 s here: the outage is at least that
    found = prove(phoenix, phoenix_project, tmp_path, traces=40, rate=10.0, kills=4,
                  outage_s=1.0, seed=11, say=said.append)  # fmt: skip
    assert found["problems"] == [], found["output"]
    assert found["traces"] == 40 and found["kills"] == 4
    assert found["exit"] == 0, found["output"]  # SIGTERM at the end: the batch, then 0
    # the cache answers what finished before a kill: only calls in flight are paid twice
    assert found["answeredTwice"] <= found["answeredTwiceBound"], found
    assert found["distinctCalls"] >= 40
    assert said == ["Phoenix stopped for 1 s", "Phoenix started again"]
    # it resumed by itself: the outage was seen, and no watcher ended but by a kill
    assert found["outageSaid"] and found["gaveUp"] == [], found["output"]


def test_sigterm_mid_batch_finishes_the_batch_in_hand_and_exits_0(
    phoenix: PhoenixServer, phoenix_project: str, tmp_path: Path
) -> None:
    with RagApp(phoenix.url, phoenix_project, seed=13, multi_hop=0.0) as app:
        sent = app.send(10)
        app.flush()
    phoenix.wait_for_spans(phoenix_project, sum(len(t.span_ids) for t in sent))
    with JevServer(api_key="k", latency_s=0.5) as jev:  # a batch takes a while
        argv = command(*watch_argv(phoenix.url, phoenix_project, tmp_path, "--since",
                                   "2000-01-01", "--idle-s", "0", "--interval-s", "0.2",
                                   "--provider", "jev", "--base-url", jev.base_url,
                                   "--api-key", "k", "--concurrency", "2"))  # fmt: skip
        with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
            deadline = time.monotonic() + 60
            while jev.requests_total == 0 and time.monotonic() < deadline:
                time.sleep(0.02)  # until the batch is being judged: the server's counter
            assert jev.requests_total > 0
            proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=60)
        assert jev.requests_total == 10  # the batch in hand was judged whole, nothing after
    assert proc.returncode == 0, err.decode()
    assert "SIGTERM: finishing the batch in hand, then stopping" in out.decode()
    assert re.search(r"judged 10 traces in [\d.]+ s, stored 10 annotations", out.decode())
    assert wait_stored(phoenix, phoenix_project, sent, timeout_s=5) == []
