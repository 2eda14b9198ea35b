"""`ragbatch gate` and `ragbatch diff` on report files: exit codes, Markdown, JUnit."""

from __future__ import annotations

import copy
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import orjson
from typer.testing import CliRunner

from ragbatch.cli._app import app
from ragbatch.compare import diff_reports, distribution_drift, gate
from ragbatch.report import Report

ROOT = Path(__file__).resolve().parents[2]
REPORT = ROOT / "reports/expected-report.json"


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def regressed(report: dict[str, Any], flips: int) -> dict[str, Any]:
    """Break ``flips`` correct rows and lower the groundedness accuracy a lot."""
    worse = copy.deepcopy(report)
    broken = 0
    for row in worse["rows"]:
        if broken < flips and row.get("diagnosis") == row.get("expected"):
            row["diagnosis"] = "JUDGE_UNCERTAIN"
            broken += 1
    component = worse["modes"]["jevOnly"]["components"]["generation"]["groundedness"]
    component["accuracy"] -= 0.3
    return worse


def write(tmp_path: Path, name: str, data: dict[str, Any]) -> Path:
    path = tmp_path / name
    path.write_bytes(orjson.dumps(data))
    return path


def test_gate_passes_against_itself(tmp_path: Path) -> None:
    junit = tmp_path / "gate.xml"
    code, out, _ = invoke("gate", str(REPORT), "--baseline", str(REPORT), "--junit", str(junit))
    assert code == 0
    assert "|" in out  # a Markdown table
    assert ET.parse(junit).getroot().tag in ("testsuite", "testsuites")


def test_gate_fails_on_a_real_regression(tmp_path: Path) -> None:
    base = orjson.loads(REPORT.read_bytes())
    current = write(tmp_path, "current.json", regressed(base, flips=30))
    md = tmp_path / "gate.md"
    code, out, _ = invoke("gate", str(current), "--baseline", str(REPORT), "--markdown", str(md))
    assert code == 1
    assert md.read_text() in out


def test_gate_small_sample_noise_is_not_a_regression(tmp_path: Path) -> None:
    base = orjson.loads(REPORT.read_bytes())
    current = write(tmp_path, "current.json", regressed(base, flips=2))
    code, out, _ = invoke("gate", str(current), "--baseline", str(REPORT))
    assert code == 0, out


def test_gate_usage_errors_exit_2(tmp_path: Path) -> None:
    code, _, err = invoke("gate", str(tmp_path / "none.json"), "--baseline", str(REPORT))
    assert code == 2 and err.startswith("error: cannot read report")
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    code, _, err = invoke("gate", str(bad), "--baseline", str(REPORT))
    assert code == 2 and "not a ragbatch report" in err


def test_diff_puts_a_threshold_change_before_the_flips(tmp_path: Path) -> None:
    changed = regressed(orjson.loads(REPORT.read_bytes()), flips=1)
    changed["policy"]["failThreshold"], changed["policy"]["passThreshold"] = 0.1, 0.9
    code, out, _ = invoke("diff", str(REPORT), str(write(tmp_path, "b.json", changed)))
    assert code == 0
    setup = out.index("### Policy, thresholds, routing, model and pricing")
    assert setup < out.index("| thresholds | `policy.failThreshold` | 0.2 | 0.1 |")
    assert out.index("(thresholds changed)") < out.index("### Diagnosis flips (1)")


def test_diff_lists_flipped_rows_and_model_changes(tmp_path: Path) -> None:
    base = orjson.loads(REPORT.read_bytes())
    changed = regressed(base, flips=1)
    changed["provider"]["answeredBy"] = ["jev-1.14.0"]
    path = write(tmp_path, "b.json", changed)
    code, out, _ = invoke("diff", str(REPORT), str(path))
    assert code == 0
    flipped = next(r["id"] for r, o in zip(changed["rows"], base["rows"], strict=True) if r != o)
    assert flipped in out and "jev-1.14.0" in out


def test_default_rules_fail_the_tighter_thresholds_run(tmp_path: Path) -> None:
    """0.1/0.9 drops cascade accuracy 87.5% -> 77.1% and sends 54% of rows to the fallback."""
    current = tmp_path / "t19.json"
    args = ("--fail-threshold", "0.1", "--pass-threshold", "0.9", "--out", str(current))
    code, _, _ = invoke("run", *args, "--quiet")
    assert code == 0
    code, out, _ = invoke("gate", str(current), "--baseline", str(REPORT))
    assert code == 1
    assert out.startswith("## ragbatch gate: FAIL: regression\n")
    lines = out.splitlines()
    assert (
        "| Jev-only accuracy | `modes.jevOnly.classification.accuracy` | 0.7708 | 0.3125 | 0.4583 "
        "| 0.02 | mcnemar-exact | 4.768e-07 | **fail**: drop 0.4583 > 0.02; 22 rows worse, "
        "0 better, p = 4.77e-07 (significant) |"
    ) in lines
    assert (
        "| Cascade accuracy | `modes.cascade.classification.accuracy` | 0.875 | 0.7708 | 0.1042 "
        "| 0.02 | mcnemar-exact | 0.2266 | **not-significant**: drop 0.1042 > 0.02; 8 rows worse, "
        "3 better, p = 0.227 (not significant: treated as noise) |"
    ) in lines
    assert (
        "| Fallback rate | `modes.cascade.fallbackRate` | 0.125 | 0.5417 | 0.4167 | 0.05 "
        "| mcnemar-exact | 1.907e-06 | **fail**: drop 0.4167 > 0.05; 20 rows worse, 0 better, "
        "p = 1.91e-06 (significant) |"
    ) in lines
    assert (
        "| Failure rate | `modes.jevOnly.failures.rate` | 0 | 0 | 0 | 0.02 | none | — "
        "| **pass**: drop 0 <= 0.02 |"
    ) in lines


def test_a_malformed_row_is_not_blamed_on_the_rules_file(tmp_path: Path) -> None:
    rules = tmp_path / "rules.json"
    rules.write_text('[{"path": "modes.jevOnly.classification.accuracy", "maxDrop": 0.02}]')
    worse = regressed(orjson.loads(REPORT.read_bytes()), flips=30)
    worse["modes"]["jevOnly"]["classification"]["accuracy"] -= 0.3
    worse["rows"][0]["expected"] = 7  # a field of the wrong type for the report's models
    current = write(tmp_path, "current.json", worse)
    code, out, err = invoke("gate", str(current), "--baseline", str(REPORT), "--rules", str(rules))
    assert (code, out) == (2, "")
    assert err.startswith(f"error: current report: row {worse['rows'][0]['id']}: expected: ")
    assert str(rules) not in err and err.count("\n") == 1


def test_a_rule_path_in_neither_report_exits_2(tmp_path: Path) -> None:
    rules = tmp_path / "rules.json"
    rules.write_text('[{"path": "modes.cascade.classification.acuracy", "maxDrop": 0.02}]')
    code, out, err = invoke("gate", str(REPORT), "--baseline", str(REPORT), "--rules", str(rules))
    assert (code, out) == (2, "")
    assert err == (
        f"error: {rules}: rule path modes.cascade.classification.acuracy is in neither report; "
        "nearest existing paths: modes.cascade.classification.accuracy, "
        "modes.cascade.classification.overallAccuracy, modes.cascade.classification.macroF1\n"
    )


def test_a_typed_report_compares_as_its_json() -> None:
    data = orjson.loads(REPORT.read_bytes())
    typed = Report.model_validate(data)
    worse = regressed(data, flips=30)
    typed_worse = Report.model_validate(worse)
    assert gate(typed_worse, typed) == gate(worse, data)
    assert not gate(typed_worse, typed).passed
    assert diff_reports(typed, typed_worse) == diff_reports(data, worse)
    assert diff_reports(typed, typed_worse).flipped  # the 30 broken rows
    assert distribution_drift(typed, typed_worse) == distribution_drift(data, worse)
