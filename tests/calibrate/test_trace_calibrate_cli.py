"""run -> calibrate -> run --policy on multi-step traces, end to end through the CLI, and the
errors a report of traces that calibration cannot read gets (docs/semantics.md §5, §8)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from typer.testing import CliRunner

from ragbatch.calibrate._fit import calibrate, calibrate_report, load_policy, thresholds_of
from ragbatch.cli._app import app
from ragbatch.core import ConfigError, Thresholds, Trace, diagnose_trace
from tests.calibrate.trace_synth import dataset_lines, mock_judgments, report_rows, synthetic_traces

ROOT = Path(__file__).resolve().parents[2]
PRICING = str(ROOT / "pricing/typesafe-2026-12.json")
GOLDEN = ROOT / "reports/expected-report-traces.json"
DATASET = ROOT / "datasets/traces.jsonl"


def cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout + result.stderr


def run(dataset: Path, out: Path, *extra: str) -> dict[str, Any]:
    code, text = cli(
        "run", str(dataset), "--out", str(out), "--pricing", PRICING, "--quiet", *extra
    )
    assert code == 0, text
    report: dict[str, Any] = orjson.loads(out.read_bytes())
    return report


def applied(policy_path: Path) -> Thresholds:
    policy = load_policy(policy_path.read_bytes(), str(policy_path))
    per = tuple((name, *pair) for name, pair in thresholds_of(policy).items())
    return Thresholds(policy.fail_threshold, policy.pass_threshold, per, policy.routing)


def test_a_policy_calibrated_on_traces_is_what_a_trace_run_applies(tmp_path: Path) -> None:
    traces = synthetic_traces(800, seed=21)
    fit, fresh = tmp_path / "fit.jsonl", tmp_path / "fresh.jsonl"
    fit.write_bytes(dataset_lines(traces[:600]))
    fresh.write_bytes(dataset_lines(traces[600:]))
    report = run(fit, tmp_path / "fit.json")
    policy = tmp_path / "policy.json"
    code, text = cli(
        "calibrate", str(tmp_path / "fit.json"), "--target-risk", "0.15", "--out", str(policy)
    )
    assert code == 0, text
    assert "estimates on the 600 labelled rows tested (600 of them multi-step traces)" in text
    written = load_policy(policy.read_bytes(), "policy.json")
    assert written.fitted_on.labelled_traces == 600
    g = written.guarantee
    assert g is not None and "a multi-step trace counts as one row" in g.assumption
    # The run's report holds what calibration needs: it reads the same answers and step
    # structure as the traces themselves give.
    direct = calibrate(report_rows(traces[:600]), 0.15, 0.95)
    assert calibrate_report(report, 0.15, 0.95).fitted_on.rows_sha256 == (
        direct.fitted_on.rows_sha256
    )
    # A trace run with the policy applies its thresholds and routing through the trace policy.
    t = applied(policy)
    for path, items in ((fresh, traces[600:]), (DATASET, _golden_traces())):
        judged = run(path, tmp_path / "with-policy.json", "--policy", str(policy))
        assert judged["policy"]["version"] == written.version
        for row, trace in zip(judged["rows"], items, strict=True):
            verdict = diagnose_trace(trace, mock_judgments(trace), t)
            assert (row["diagnosis"], row["route"]) == (verdict.diagnosis, verdict.route)


def _golden_traces() -> list[Trace]:
    return [Trace.model_validate_json(line) for line in DATASET.read_bytes().splitlines()]


def test_the_golden_trace_report_is_read_and_too_small_to_calibrate() -> None:
    report = orjson.loads(GOLDEN.read_bytes())
    with pytest.raises(ConfigError) as error:
        calibrate_report(report, 0.1, 0.9)
    assert str(error.value).startswith(
        "only 8 labelled successful rows or traces; calibration needs at least 30"
    )


def trace_report() -> list[dict[str, Any]]:
    return report_rows(synthetic_traces(40, seed=5))


def test_a_trace_row_without_a_judgment_its_verdict_reads_is_named() -> None:
    rows = trace_report()
    step = next(s for s in rows[3]["steps"] if s["kind"] == "answer")
    del step["generation"]["groundedness"]
    with pytest.raises(ConfigError) as error:
        calibrate(rows, 0.1, 0.9)
    assert str(error.value).startswith(
        f"row {rows[3]['id']}: step {step['index']}: judgment generation.groundedness is missing"
    )


def test_a_trace_row_whose_steps_make_no_trace_is_named() -> None:
    rows = trace_report()
    rows[2]["steps"] = rows[2]["steps"][1:]  # no user step first
    with pytest.raises(ConfigError, match=f"row {rows[2]['id']}: steps\\[0\\] has index 1"):
        calibrate(rows, 0.1, 0.9)
    rows = trace_report()
    rows[2]["steps"] = [{**s, "index": i} for i, s in enumerate(rows[2]["steps"][1:])]
    with pytest.raises(ConfigError, match=f"row {rows[2]['id']}: .*a trace starts with a user"):
        calibrate(rows, 0.1, 0.9)


def test_a_failed_or_unlabelled_trace_is_not_read() -> None:
    rows = trace_report()
    base = calibrate(rows[:35], 0.3, 0.9, folds=2).fitted_on
    broken = [dict(r) for r in rows[:35]]
    broken.append({**rows[35], "status": "failed", "steps": rows[35]["steps"][1:]})
    broken.append({**rows[36], "expected": None})
    again = calibrate(broken, 0.3, 0.9, folds=2).fitted_on
    assert (again.labelled_rows, again.rows_sha256) == (base.labelled_rows, base.rows_sha256)
