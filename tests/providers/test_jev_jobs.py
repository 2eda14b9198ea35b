"""Whole jobs against a real Jev test server on 127.0.0.1: failed rows are failures in the
report, never verdicts; a rejected key or a spent error budget aborts the run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from typer.testing import CliRunner

from ragbatch.cli._app import app
from ragbatch.core._errors import EXIT_ABORTED, EXIT_ROW_FAILURES, RunAborted
from ragbatch.run._job import run_job
from ragbatch.testing import Fault, JevServer
from tests.conftest import job_config
from tests.providers.jev_calls import DATASET, KEY, MODEL, ROOT, ROWS, SECRET, StartServer

PRICING = ROOT / "pricing" / "typesafe-2026-12.json"


def cli_args(server: JevServer, tmp_path: Path, *extra: str) -> list[str]:
    """``ragbatch run`` arguments for the fixture against ``server`` (key from the env)."""
    return [
        "run",
        str(DATASET),
        "--provider", "jev",
        "--base-url", server.base_url,
        "--model", MODEL,
        "--cache-dir", str(tmp_path / "cli-cache"),
        "--out", str(tmp_path / "cli.json"),
        "--pricing", str(PRICING),
        "--quiet",
        *extra,
    ]  # fmt: skip


def state_question(body: dict[str, Any]) -> str | None:
    """The row question inside a request body's state (None for a body that is not one)."""
    state = body.get("state")
    return state.get("question") if isinstance(state, dict) else None


def test_rejected_key_stops_the_job_early(jev_server: JevServer, tmp_path: Path) -> None:
    config = job_config(jev_server, tmp_path, api_key=SECRET, concurrency=4)
    with pytest.raises(RunAborted) as info:
        run_job(config)
    assert SECRET not in str(info.value)
    assert jev_server.responses_by_status == {401: jev_server.requests_total}
    assert 1 <= jev_server.requests_total <= 8  # at most a request per worker, not 48
    assert not (tmp_path / "r.json").exists()


def test_cli_exits_4_on_rejected_key_without_printing_it(
    start_jev_server: StartServer, tmp_path: Path
) -> None:
    server = start_jev_server(
        api_key=SECRET,
        fault_fn=lambda index, body: Fault(kind="status", status=403, message=f"{SECRET}?"),
    )
    args = cli_args(server, tmp_path, "--concurrency", "4")
    result = CliRunner().invoke(app, args, env={"TYPESAFE_API_KEY": SECRET})
    assert result.exit_code == EXIT_ABORTED
    assert result.stderr.startswith("error: the Jev API rejected the key (HTTP 403: ***?)")
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.output
    assert SECRET not in result.output
    assert server.requests_total <= 8


# -- failed rows in a whole job ------------------------------------------------------------
FAILING = {ROWS[3].question, ROWS[10].question}


def fail_chosen_rows(index: int, body: dict[str, Any]) -> Fault | None:
    """422 for the two chosen rows, every time they are asked."""
    return Fault(kind="status", status=422) if state_question(body) in FAILING else None


def test_rows_that_fail_are_failures_not_verdicts(
    start_jev_server: StartServer, tmp_path: Path
) -> None:
    server = start_jev_server(fault_fn=fail_chosen_rows)
    result = run_job(job_config(server, tmp_path))
    report = orjson.loads((tmp_path / "r.json").read_bytes())
    assert (tmp_path / "r.json").read_bytes() == result.report_bytes
    failed_ids = {ROWS[3].id, ROWS[10].id}
    for row in report["rows"]:
        if row["id"] in failed_ids:
            assert (row["status"], row["route"]) == ("failed", "failed")
            assert row["error"]["kind"] == "http-422"
            assert "diagnosis" not in row and row["cascade"]["status"] == "failed"
        else:
            assert row["status"] == "ok" and row["route"] != "failed"
    failures = report["modes"]["jevOnly"]["failures"]
    assert failures == {"count": 2, "rate": 2 / 48, "byKind": {"http-422": 2}}
    assert report["modes"]["jevOnly"]["routes"].get("failed") == 2
    assert server.requests_total == 48  # 422 is not retried

    # The CLI says so with exit code 3; the failed rows were not cached, so asked again.
    result_cli = CliRunner().invoke(app, cli_args(server, tmp_path), env={"TYPESAFE_API_KEY": KEY})
    assert result_cli.exit_code == EXIT_ROW_FAILURES
    assert server.requests_total == 48 + 48
    rerun = orjson.loads((tmp_path / "cli.json").read_bytes())
    assert rerun["modes"]["jevOnly"]["failures"]["count"] == 2


def test_error_budget_aborts_the_run(jev_server: JevServer, tmp_path: Path) -> None:
    jev_server.fault_fn = lambda index, body: Fault(kind="status", status=500)
    config = job_config(
        jev_server,
        tmp_path,
        concurrency=2,
        max_retries=0,
        max_error_rate=0.2,
        error_budget_rows=5,
    )
    with pytest.raises(RunAborted, match="over the error budget of 20%"):
        run_job(config)
    assert 5 <= jev_server.requests_total <= 8
    assert not (tmp_path / "r.json").exists()
