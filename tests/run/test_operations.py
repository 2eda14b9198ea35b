"""Operating large runs: the budget is never exceeded and resumes, estimates, progress, rows-out."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
from typer.testing import CliRunner

from ragbatch.cli._app import app
from tests.conftest import JEV_KEY
from tests.run.test_resume import StartServer, comparable

ROOT = Path(__file__).resolve().parents[2]
DATASET = str(ROOT / "datasets/rag-fixture.jsonl")
PRICING = str(ROOT / "pricing/typesafe-2026-12.json")


def cli(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args), env=env)
    return result.exit_code, result.stdout, result.stderr


def live(server_url: str, cache: Path, out: Path, *extra: str) -> tuple[int, str, str]:
    return cli(
        "run", DATASET, "--provider", "jev", "--base-url", server_url, "--model", "jev-1.13.0",
        "--cache-dir", str(cache), "--out", str(out), "--pricing", PRICING, "--quiet",
        "--concurrency", "4", *extra, env={"TYPESAFE_API_KEY": JEV_KEY},
    )  # fmt: skip


def estimate(cache: Path) -> tuple[int, dict[str, Any]]:
    code, out, _ = cli(
        "estimate", DATASET, "--model", "jev-1.13.0", "--cache-dir", str(cache),
        "--pricing", PRICING, "--json",
    )  # fmt: skip
    data: dict[str, Any] = orjson.loads(out)
    return code, data


def report(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = orjson.loads(path.read_bytes())
    return data


def test_budget_is_never_exceeded_and_a_rerun_resumes(
    start_jev_server: StartServer, tmp_path: Path
) -> None:
    server = start_jev_server()
    cache, budget = tmp_path / "cache", 0.0008  # about 40% of the fixture's cost
    code, _, err = live(server.base_url, cache, tmp_path / "part.json", "--max-cost", str(budget))
    assert code == 5, err
    partial = report(tmp_path / "part.json")
    assert partial["incomplete"]["rowsNotEvaluated"] > 0
    assert partial["modes"]["jevOnly"]["cost"]["usd"] <= budget  # what the service billed
    not_evaluated = [
        r for r in partial["rows"] if r.get("error", {}).get("kind") == "budget-exhausted"
    ]
    assert len(not_evaluated) == partial["incomplete"]["rowsNotEvaluated"]
    paid = server.successful

    code, _, err = live(server.base_url, cache, tmp_path / "full.json", "--max-cost", "1")
    assert code == 0, err
    assert paid < 48 and server.successful == 48  # rows already paid for were not paid again
    fresh_server = start_jev_server()
    assert live(fresh_server.base_url, tmp_path / "fresh", tmp_path / "fresh.json")[0] == 0
    resumed, uninterrupted = report(tmp_path / "full.json"), report(tmp_path / "fresh.json")
    assert "incomplete" not in resumed
    assert comparable(resumed["rows"]) == comparable(uninterrupted["rows"])
    assert (
        resumed["modes"]["jevOnly"]["classification"]
        == uninterrupted["modes"]["jevOnly"]["classification"]
    )


def test_estimate_matches_real_usage(start_jev_server: StartServer, tmp_path: Path) -> None:
    server = start_jev_server()
    cache = tmp_path / "cache"
    code, before = estimate(cache)
    assert code == 0 and before["calls"] == 48 and before["cacheHits"] == 0
    assert live(server.base_url, cache, tmp_path / "r.json")[0] == 0
    real = report(tmp_path / "r.json")["modes"]["jevOnly"]["usage"]["inputTokens"]
    assert abs(before["inputTokens"] - real) / real < 0.01  # the documented estimator error
    code, after = estimate(cache)
    assert after["cacheHits"] == 48 and after["inputTokens"] == 0 and after["costUsd"] == 0.0
    assert abs(after["accuracy"]["totalRelativeError"]) < 0.01


def test_progress_lines_in_a_log(tmp_path: Path) -> None:
    code, _, err = cli(
        "run",
        DATASET,
        "--out",
        str(tmp_path / "r.json"),
        "--pricing",
        PRICING,
        "--progress-interval",
        "0",
    )
    assert code == 0
    lines = [line for line in err.splitlines() if line.startswith("progress: ")]
    assert lines[-1].startswith("progress: 48/48 rows")
    assert "spent USD" in lines[-1] and "pricing 2026-12-01" in lines[-1]


def test_rows_out_equals_the_report_rows(tmp_path: Path) -> None:
    rows = tmp_path / "rows.jsonl"
    code, out, _ = cli(
        "run",
        DATASET,
        "--out",
        str(tmp_path / "r.json"),
        "--pricing",
        PRICING,
        "--rows-out",
        str(rows),
        "--concurrency",
        "7",
    )
    assert code == 0 and f"per-row results: {rows}" in out
    streamed = [orjson.loads(line) for line in rows.read_bytes().splitlines()]
    questions = [orjson.loads(line)["question"] for line in Path(DATASET).read_bytes().splitlines()]
    # each line is the report's rows[] entry with the row's question right after its id
    expected = [
        {"id": row["id"], "question": question, **row}
        for row, question in zip(report(tmp_path / "r.json")["rows"], questions, strict=True)
    ]
    assert streamed == expected
    assert all(list(line)[:2] == ["id", "question"] for line in streamed)


def test_large_reports_keep_aggregates_only(tmp_path: Path) -> None:
    rows, out = tmp_path / "rows.jsonl", tmp_path / "r.json"
    code, _, _ = cli(
        "run",
        DATASET,
        "--out",
        str(out),
        "--pricing",
        PRICING,
        "--rows-out",
        str(rows),
        "--max-report-rows",
        "10",
        "--quiet",
    )
    assert code == 0
    full = report(out)
    assert full["rows"] == [] and full["rowsOmitted"] == {
        "rows": 48,
        "limit": 10,
        "reason": "more rows than --max-report-rows: per-row results are in --rows-out",
    }
    golden = report(ROOT / "reports/expected-report.json")
    assert full["modes"] == golden["modes"]  # aggregates are unchanged
    assert len(rows.read_bytes().splitlines()) == 48


def test_above_the_limit_the_run_record_drops_call_entries_and_a_warning_names_rows_out(
    tmp_path: Path,
) -> None:
    out, record = tmp_path / "r.json", tmp_path / "record.json"
    code, _, err = cli(
        "run", DATASET, "--out", str(out), "--pricing", PRICING, "--max-report-rows", "10",
        "--run-record", str(record), "--quiet",
    )  # fmt: skip
    assert code == 0
    assert "48 rows > --max-report-rows 10" in err and "--rows-out PATH" in err
    facts = orjson.loads(record.read_bytes())
    assert "calls" not in facts and facts["callsOmitted"]["rows"] == 48
    not_kept = (
        "more rows than --max-report-rows and no --rows-out: per-row results were not kept; "
        "rerun with --rows-out PATH (cached rows are free) to keep them"
    )
    assert facts["callsOmitted"]["reason"] == not_kept  # no --rows-out: never "in --rows-out"
    assert report(out)["rowsOmitted"]["reason"] == not_kept
    code, _, err = cli(
        "run", DATASET, "--out", str(out), "--pricing", PRICING, "--run-record", str(record),
        "--quiet",
    )  # fmt: skip
    assert code == 0 and "max-report-rows" not in err
    assert len(orjson.loads(record.read_bytes())["calls"]) == 48
