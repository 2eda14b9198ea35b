"""`ragbatch gate --max-flip-rate`: the judge audit's entries against the gate's rate."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import orjson
import pytest
from typer.testing import CliRunner

from ragbatch.cli._app import app
from ragbatch.compare import audit_gate
from ragbatch.core import ConfigError
from tests.report.audit_section import audit_json

ROOT = Path(__file__).resolve().parents[2]
REPORT = ROOT / "reports/expected-report.json"
DATA: dict[str, Any] = orjson.loads(REPORT.read_bytes())


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def audited(tmp_path: Path) -> Path:
    path = tmp_path / "current.json"
    path.write_bytes(orjson.dumps({**DATA, "judgeAudit": audit_json()}))
    return path


def test_the_gates_rate_decides_not_the_runs_flag() -> None:
    report = {"judgeAudit": audit_json()}  # flipLow 0.08, 0.06 (both flagged at 0.05), 0.01
    assert [c.failed for c in audit_gate(report, 0.05).checks] == [True, True, False]
    assert [c.failed for c in audit_gate(report, 0.07).checks] == [True, False, False]
    assert audit_gate(report, 0.08).exit_code == 0  # flipLow == rate: not wholly above
    assert audit_gate(report, 0.0).exit_code == 1


def test_gate_fails_and_names_the_entries(audited: Path, tmp_path: Path) -> None:
    junit = tmp_path / "gate.xml"
    code, out, _ = invoke(
        "gate", str(audited), "--baseline", str(REPORT), "--max-flip-rate", "0.07",
        "--junit", str(junit),
    )  # fmt: skip
    assert code == 1
    assert "### Judge audit (max flip rate 0.07): FAIL" in out
    assert "Flip rate wholly above 0.07: order/chunkRelevance." in out
    cases = ET.parse(junit).getroot().iter("testcase")
    failed = [c.get("name") for c in cases if c.find("failure") is not None]
    assert failed == ["judge audit: order probe, chunkRelevance"]


def test_gate_passes_when_no_interval_lies_above(audited: Path) -> None:
    code, out, _ = invoke("gate", str(audited), "--baseline", str(REPORT), "--max-flip-rate", "0.1")
    assert code == 0
    assert "### Judge audit (max flip rate 0.1): PASS" in out


def test_without_the_option_the_audit_is_not_gated(audited: Path) -> None:
    code, out, _ = invoke("gate", str(audited), "--baseline", str(REPORT))
    assert code == 0 and "Judge audit" not in out


def test_a_report_without_the_section_is_a_usage_error() -> None:
    code, _, err = invoke("gate", str(REPORT), "--baseline", str(REPORT), "--max-flip-rate", "0.05")
    assert code == 2
    assert err == (
        "error: --max-flip-rate needs a report with a judgeAudit section: run with --probe "
        "order,length,repeat,complement or `ragbatch probe REPORT --dataset DATA` first\n"
    )
    with pytest.raises(ConfigError):
        audit_gate(DATA, 0.05)
