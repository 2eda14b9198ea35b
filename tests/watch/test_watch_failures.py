"""``ragbatch watch`` when things go wrong, against a real Phoenix: an unreachable server, a
refused annotation, a window that drifted from the baseline, the cost limits."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path
from typing import Any

import orjson
import pytest
from typer.testing import CliRunner

from bench.bench_watch import wait_stored
from ragbatch.cli._app import app
from ragbatch.testing import JevServer
from ragbatch.testing.otlp_app import SentTrace
from ragbatch.testing.phoenix import PhoenixServer
from tests.conftest import fill
from tests.watch._watching import annotations_on, check_exactly_once, command, watch_argv
from tests.watch.test_watch_once import BACKFILL, send

ROOT = Path(__file__).resolve().parents[2]


def invoke(*argv: str) -> Any:
    return CliRunner().invoke(app, list(argv))


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_once_gives_up_on_a_phoenix_that_never_answers(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    result = invoke(*watch_argv(url, "p", tmp_path, "--once", "--interval-s", "0.1",
                                "--phoenix-retry-s", "0.5"))  # fmt: skip
    assert result.exit_code == 3, result.output
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1  # an outage is said once, not at every retry
    assert f"Phoenix at {url}" in warnings[0] and "trying again with backoff" in warnings[0]
    assert result.stderr.splitlines()[-1] == "error: Phoenix unreachable for 0 s"
    assert "Traceback" not in result.output


def test_an_annotation_phoenix_refuses_is_said_and_the_rest_are_stored(
    phoenix: PhoenixServer, phoenix_project: str, tmp_path: Path
) -> None:
    sent = send(phoenix, phoenix_project, 6, seed=21)
    # take the spans in without judging them (idle for a day), then delete one trace's root
    taken = invoke(*watch_argv(phoenix.url, phoenix_project, tmp_path, "--once", "--since",
                               "2000-01-01", "--idle-s", "86400"))  # fmt: skip
    assert taken.exit_code == 0, taken.output
    gone = sent[2]
    phoenix.request_json("DELETE", f"/v1/spans/{gone.root_span_id}")
    result = invoke(*watch_argv(phoenix.url, phoenix_project, tmp_path, "--once", *BACKFILL))
    assert result.exit_code == 0, result.output
    assert f"warning: Phoenix refused the annotation ragbatch on span {gone.root_span_id}" in (
        result.stderr
    )
    kept = [t for t in sent if t is not gone]
    check_exactly_once(phoenix, phoenix_project, kept)
    again = invoke(*watch_argv(phoenix.url, phoenix_project, tmp_path, "--once", *BACKFILL))
    assert again.exit_code == 0 and "refused" not in again.stderr  # dropped, not retried


def test_a_drifted_window_alerts_once_and_runs_the_alert_command(
    phoenix: PhoenixServer, phoenix_project: str, tmp_path: Path
) -> None:
    send(phoenix, phoenix_project, 16, seed=23)
    alert = tmp_path / "alert.json"
    # the bundled dataset's report: other questions, other distributions than this traffic
    baseline = ROOT / "reports/expected-report.json"
    argv = watch_argv(phoenix.url, phoenix_project, tmp_path, "--once", *BACKFILL,
                      "--report-every", "1s", "--baseline", str(baseline),
                      "--alert-command", f"cat > {alert}")  # fmt: skip
    result = wait_for_windows(argv)
    alerts = [line for line in result.stderr.splitlines() if line.startswith("alert:")]
    assert alerts, result.output
    sent_alert = orjson.loads(alert.read_bytes())
    assert sent_alert["source"] == f"phoenix {phoenix.url} project {phoenix_project}"
    assert sent_alert["baseline"] == str(baseline)
    assert sent_alert["reasons"] and alerts[-1].endswith("; ".join(sent_alert["reasons"]))
    assert Path(sent_alert["report"]).exists() and Path(sent_alert["diff"]).exists()
    assert "drift" in Path(sent_alert["diff"]).read_text().lower()


def wait_for_windows(argv: list[str]) -> Any:
    """``--once`` until a window report was written (windows close on wall-clock time)."""
    for _ in range(40):
        result = invoke(*argv)
        assert result.exit_code == 0, result.output
        if "window " in result.stdout:
            return result
    raise AssertionError("no window was reported")


def live(jev: JevServer) -> tuple[str, ...]:
    return ("--provider", "jev", "--model", "jev-1.13.0", "--base-url", jev.base_url,
            "--api-key", "k")  # fmt: skip


def test_the_hourly_cap_holds_traces_in_flight_and_max_cost_stops_with_5(
    phoenix: PhoenixServer, phoenix_project: str, tmp_path: Path
) -> None:
    sent: list[SentTrace] = send(phoenix, phoenix_project, 8, seed=25)
    with JevServer(api_key="k") as jev:
        capped = invoke(*watch_argv(phoenix.url, phoenix_project, tmp_path, "--once", *BACKFILL,
                                    *live(jev), "--max-cost-per-hour", "0"))  # fmt: skip
        assert capped.exit_code == 0, capped.output
        assert "8 traces wait: --max-cost-per-hour reached for this hour" in capped.stdout
        assert jev.requests_total == 0 and annotations_on(phoenix, phoenix_project, sent) == []
        spent = invoke(*watch_argv(phoenix.url, phoenix_project, tmp_path, "--once", *BACKFILL,
                                   *live(jev), "--max-cost", "0.000001"))  # fmt: skip
        assert spent.exit_code == 5, spent.output
        assert spent.stderr.splitlines()[-1].startswith("error: --max-cost reached")
        assert jev.requests_total == 0
        done = invoke(*watch_argv(phoenix.url, phoenix_project, tmp_path, "--once", *BACKFILL,
                                  *live(jev)))  # fmt: skip
        assert done.exit_code == 0, done.output
    check_exactly_once(phoenix, phoenix_project, sent)


@pytest.mark.parametrize("small_fs", ["4m"], indirect=True)
def test_a_cache_disk_filling_up_mid_watch_is_one_error_line_and_a_rerun_goes_on(
    phoenix: PhoenixServer, phoenix_project: str, tmp_path: Path, small_fs: Path
) -> None:
    argv = [*watch_argv(phoenix.url, phoenix_project, tmp_path, *BACKFILL),
            "--cache-dir", str(small_fs / "cache")]  # fmt: skip
    with subprocess.Popen(
        command(*argv), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    ) as proc:
        try:
            first = send(phoenix, phoenix_project, 6, seed=27)
            wait_stored(phoenix, phoenix_project, first, timeout_s=60)
            fill(small_fs)  # the state file and the reply cache have no room left
            later = send(phoenix, phoenix_project, 12, seed=28)
            _, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
    message = err.decode()
    assert proc.returncode == 2, message
    errors = [line for line in message.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "full" in errors[0], message
    assert "Traceback" not in message
    (small_fs / "filler").unlink()
    again = invoke(*argv, "--once")
    assert again.exit_code == 0, again.output
    check_exactly_once(phoenix, phoenix_project, first + later)
