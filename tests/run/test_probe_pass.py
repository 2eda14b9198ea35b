"""The judge audit's probe pass in a run (docs/semantics.md §9): through the run's provider
chain, byte-identical across concurrency and in an offline replay; ``--context-order``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest

from ragbatch.core import Call, Reply, Row, Thresholds, TokenUsage, request_key
from ragbatch.core._wire import Answer, JevRequest, NoulAnswer
from ragbatch.run._job import run_job
from ragbatch.run._runner import judge_row
from ragbatch.testing import JevServer
from tests.conftest import job_config

PROBES = "order,length,repeat,complement"


def report(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = orjson.loads(path.read_bytes())
    return data


def test_probes_run_after_the_rows_and_replay_byte_identical(
    jev_server: JevServer, tmp_path: Path
) -> None:
    live = job_config(jev_server, tmp_path, probe=PROBES, out=tmp_path / "live.json")
    run_job(live)
    rows = report(tmp_path / "live.json")["dataset"]["rows"]
    bodies = jev_server.bodies
    audit = report(tmp_path / "live.json")["judgeAudit"]
    probed = {e["probe"]: e["rows"] for e in audit["probes"] if e["judgment"] == "groundedness"}
    # every row's request, then one request a probed row and probe (order: 2+ contexts)
    order_rows = next(e["rows"] for e in audit["probes"] if e["probe"] == "order")
    assert len(bodies) == rows + order_rows + 3 * audit["sampledRows"]
    assert probed == {"order": order_rows, "length": rows, "repeat": rows, "complement": rows}
    # repeat: the very bytes of a row's own request, sent again past the cache
    assert sum(b == bodies[0] for b in bodies) == 2
    replays = []
    for concurrency in (1, 32):
        out = tmp_path / f"offline-{concurrency}.json"
        offline = live.replace(
            offline=True, concurrency=concurrency, out=out, base_url="http://127.0.0.1:9"
        )
        run_job(offline)
        replays.append(out.read_bytes())
    assert replays[0] == replays[1]
    assert report(tmp_path / "offline-1.json")["judgeAudit"] == audit
    assert len(jev_server.bodies) == len(bodies)  # the replay sent nothing


def test_a_run_without_probes_has_no_audit_section(jev_server: JevServer, tmp_path: Path) -> None:
    run_job(job_config(jev_server, tmp_path))
    assert "judgeAudit" not in report(tmp_path / "r.json")


def test_the_repeat_call_is_cached_under_its_own_key() -> None:
    row = Row.model_validate(
        {"id": "x", "question": "q?", "contexts": [{"id": "c", "text": "t"}], "answer": "a"}
    )
    from ragbatch.core import build_request

    request = build_request(row, "m")
    plain = Call(request=request, row=row)
    repeat = Call(request=request, row=row, probe="repeat")
    assert request_key("e", plain.request) != request_key("e", repeat.request, repeat.probe)


class Scripted:
    """A provider whose P(true) depends on the order of the contexts it is sent."""

    name = "scripted"
    endpoint = "scripted"
    model = "m"

    def __init__(self) -> None:
        self.requests: list[JevRequest] = []

    async def fetch_answers(self, call: Call) -> Reply:
        self.requests.append(call.request)
        first = call.request.state["contexts"][0]["id"]
        p = 0.2 if first == "c1" else 0.6
        answers: dict[str, Answer] = {
            qid: NoulAnswer(type="noul", noul=p) for qid in call.request.questions
        }
        usage = TokenUsage(input_tokens=1)
        return Reply(model="m", answers=answers, usage=usage, latency_ms=1.0)

    async def aclose(self) -> None:
        return None


@pytest.mark.parametrize(
    ("order", "calls", "expected"), [("as-is", 1, 0.2), ("reversed", 1, 0.6), ("both", 2, 0.4)]
)
def test_context_order_both_asks_twice_and_averages(
    order: str, calls: int, expected: float
) -> None:
    row = Row.model_validate(
        {
            "id": "x",
            "question": "q?",
            "contexts": [{"id": "c1", "text": "a"}, {"id": "c2", "text": "b"}],
            "answer": "a",
        }
    )
    provider = Scripted()
    outcome = anyio.run(judge_row, row, provider, Thresholds(), None, order)
    assert len(provider.requests) == calls
    assert outcome.judgments is not None
    assert outcome.judgments.generation.groundedness == pytest.approx(expected)
    assert len(outcome.replies) == calls  # both replies are paid for


def test_estimate_doubles_with_context_order_both(tmp_path: Path) -> None:
    from ragbatch.run._factory import estimate_options
    from tests.conftest import ROOT

    base = {
        "dataset": ROOT / "datasets" / "rag-fixture.jsonl",
        "pricing": ROOT / "pricing" / "typesafe-2026-12.json",
    }
    from ragbatch.run._options import RunOptions

    one = estimate_options(RunOptions.of(**base))
    two = estimate_options(RunOptions.of(**base, context_order="both"))
    probed = estimate_options(RunOptions.of(**base, probe="repeat"))
    assert two.calls == 2 * one.calls
    assert probed.probe_calls == one.calls  # under 200 rows: every row is probed once
    assert probed.calls == 2 * one.calls


def test_ragbatch_probe_on_a_report_equals_the_run_with_probes(
    jev_server: JevServer, tmp_path: Path
) -> None:
    from tests.run.test_operations import cli

    with_probes = job_config(jev_server, tmp_path, probe=PROBES, out=tmp_path / "probed.json")
    run_job(with_probes)
    run_job(job_config(jev_server, tmp_path, out=tmp_path / "plain.json"))
    sent = len(jev_server.bodies)
    code, stdout, stderr = cli(
        "probe", str(tmp_path / "plain.json"), "--dataset", str(with_probes.input.dataset),
        "--provider", "jev", "--model", "jev-1.13.0", "--offline",
        "--cache-dir", str(tmp_path / "cache"), "--out", str(tmp_path / "audited.json"),
        "--pricing", str(with_probes.policy.pricing),
    )  # fmt: skip
    assert code == 0, stderr
    assert "wrote" in stdout
    assert (tmp_path / "audited.json").read_bytes() == (tmp_path / "probed.json").read_bytes()
    assert len(jev_server.bodies) == sent  # replayed from the cache, offline


def test_probe_refuses_workers(jev_server: JevServer, tmp_path: Path) -> None:
    from ragbatch.core import ConfigError

    with pytest.raises(ConfigError, match="a --shard has not"):
        run_job(job_config(jev_server, tmp_path, probe="repeat", shard="1/2"))
