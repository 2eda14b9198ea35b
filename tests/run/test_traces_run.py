"""Multi-step traces through a whole run (docs/semantics.md §8): each trace judged a request
per step, its verdict and first failing step as labelled, its row carrying its steps, a
failed step a failed row, and the golden report byte-equal to the committed one.

To refresh the golden on purpose (and review the diff):
    ragbatch run datasets/traces.jsonl --baseline lexical --out reports/expected-report-traces.json
"""

from __future__ import annotations

from pathlib import Path

import orjson
from typer.testing import CliRunner

from ragbatch.cli._app import app
from ragbatch.core import EXIT_ROW_FAILURES, Trace, step_requests

ROOT = Path(__file__).resolve().parents[2]
TRACES = ROOT / "datasets/traces.jsonl"
PRICING = ROOT / "pricing/typesafe-2026-12.json"


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["run", *args, "--pricing", str(PRICING), "--quiet"])
    return result.exit_code, result.output


def traces() -> list[Trace]:
    return [Trace.model_validate_json(line) for line in TRACES.read_bytes().splitlines()]


def test_the_traces_report_matches_its_golden_file(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    assert run(str(TRACES), "--baseline", "lexical", "--out", str(out)) == (0, "")
    assert out.read_bytes() == (ROOT / "reports/expected-report-traces.json").read_bytes()


def test_each_trace_gets_its_labelled_verdict_and_first_failing_step(tmp_path: Path) -> None:
    out, rows_out = tmp_path / "report.json", tmp_path / "rows.jsonl"
    assert run(str(TRACES), "--out", str(out), "--rows-out", str(rows_out))[0] == 0
    report = orjson.loads(out.read_bytes())
    by_id = {t.id: t for t in traces()}
    routes = {}
    for row in report["rows"]:
        trace = by_id[row["id"]]
        assert trace.expected is not None
        routes[row["id"]] = row["route"]
        if row["route"] == "auto":
            assert row["diagnosis"] == trace.expected.diagnosis, row["id"]
            assert row["firstFailingStep"] == trace.expected.first_failing_step, row["id"]
        assert [s["kind"] for s in row["steps"]] == [s.kind for s in trace.steps]
        # one request per judged step, and the usage counts each of them
        assert row["usage"]["calls"] == len(step_requests(trace, "mock-jev"))
        assert row["hops"] == sum(s.kind == "retrieval" for s in trace.steps)
    # the final answer's groundedness lies in the band: the trace goes to the fallback
    assert routes["final-answer-uncertain"] == "fallback"
    assert list(routes.values()).count("fallback") == 1
    recovered = next(r for r in report["rows"] if r["id"] == "recovered-hop")
    assert recovered["wastedHops"] == 1 and recovered["steps"][1]["recovered"] is True
    assert report["decisions"]["traces"]["count"] == len(by_id)
    # --rows-out carries the same rows, firstFailingStep null (no step failed) included
    lines = [orjson.loads(line) for line in rows_out.read_bytes().splitlines()]
    passed = next(r for r in lines if r["id"] == "two-hops-fine")
    assert "firstFailingStep" in passed and passed["firstFailingStep"] is None
    assert "firstFailingStep" in report["rows"][0] and report["rows"][0]["firstFailingStep"] is None


def test_a_step_whose_call_fails_makes_the_trace_a_failed_row(tmp_path: Path) -> None:
    line = orjson.loads(TRACES.read_bytes().splitlines()[0])
    del line["steps"][2]["mock"]["retrieval"]["sufficiency"]
    dataset = tmp_path / "broken.jsonl"
    dataset.write_bytes(orjson.dumps(line) + b"\n")
    out = tmp_path / "report.json"
    assert run(str(dataset), "--out", str(out))[0] == EXIT_ROW_FAILURES
    row = orjson.loads(out.read_bytes())["rows"][0]
    assert (row["status"], row["route"]) == ("failed", "failed")
    assert "diagnosis" not in row and "firstFailingStep" not in row
    assert row["error"]["kind"] == "mock-missing-answer"
    assert row["error"]["message"].startswith("step 2 (retrieval): ")
    # the step judged before the failing one is kept, and so is every step's kind
    assert row["steps"][1]["retrieval"]["chunkRelevance"] == {"plans-1": 0.94}
    assert [s["kind"] for s in row["steps"]] == ["user", "retrieval", "retrieval", "answer"]


def test_rows_and_traces_in_one_file_keep_row_reports_unchanged(tmp_path: Path) -> None:
    fixture = (ROOT / "datasets/rag-fixture.jsonl").read_bytes()
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_bytes(fixture + TRACES.read_bytes())
    rows_only, both = tmp_path / "rows.json", tmp_path / "both.json"
    assert run(str(ROOT / "datasets/rag-fixture.jsonl"), "--out", str(rows_only))[0] == 0
    assert run(str(mixed), "--out", str(both))[0] == 0
    row_results = orjson.loads(rows_only.read_bytes())["rows"]
    mixed_results = orjson.loads(both.read_bytes())["rows"]
    assert mixed_results[: len(row_results)] == row_results
    assert all("steps" not in r for r in row_results)


def test_a_step_after_a_turns_answer_belongs_to_that_turn(tmp_path: Path) -> None:
    # an agent may call a tool after answering (a ticket logged): still the same turn
    line = orjson.loads(TRACES.read_bytes().splitlines()[3])  # three turns
    line["steps"].insert(3, {"kind": "tool", "name": "log_ticket", "input": {"topic": "returns"}})
    dataset = tmp_path / "after.jsonl"
    dataset.write_bytes(orjson.dumps(line) + b"\n")
    out = tmp_path / "report.json"
    assert run(str(dataset), "--out", str(out))[0] == 0
    steps = orjson.loads(out.read_bytes())["rows"][0]["steps"]
    assert [(s["kind"], s["turn"]) for s in steps[:5]] == [
        ("user", 0),
        ("retrieval", 0),
        ("answer", 0),
        ("tool", 0),
        ("user", 1),
    ]
    assert steps[-1]["turn"] == 2
