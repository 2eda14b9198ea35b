"""`ragbatch gate` and `ragbatch diff` on report files: exit codes, Markdown, JUnit."""

from __future__ import annotations

import copy
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import orjson
from typer.testing import CliRunner

from ragbatch.cli.app import app

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
