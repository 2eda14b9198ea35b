"""`calibrate` and `infer` warn on stderr when the judge audit flagged judgments they rely on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
from typer.testing import CliRunner

from ragbatch.cli._app import app
from tests.compare.test_inference import labelled
from tests.report.audit_section import audit_json

ROOT = Path(__file__).resolve().parents[2]
REPORT = ROOT / "reports/expected-report.json"
DATA: dict[str, Any] = orjson.loads(REPORT.read_bytes())
NAMED = "chunkRelevance (order), groundedness (length)"


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def audited(tmp_path: Path, section: dict[str, Any] | None) -> Path:
    path = tmp_path / "report.json"
    path.write_bytes(orjson.dumps({**DATA, "judgeAudit": section}))
    return path


def labels(tmp_path: Path) -> Path:
    path = tmp_path / "labels.jsonl"
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in labelled(0.3)))
    return path


def test_calibrate_warns_naming_the_flagged_judgments(tmp_path: Path) -> None:
    report, policy = audited(tmp_path, audit_json()), tmp_path / "policy.json"
    code, _, err = invoke("calibrate", str(report), "--target-risk", "0.5", "--out", str(policy))
    assert code == 0, err
    assert policy.exists()
    assert err == (
        f"warning: the judge audit flagged {NAMED}: the calibrated policy relies on them, and "
        "its figures assume a judge that these probes do not move (see "
        "docs/guides/judge-audit.md)\n"
    )


def test_calibrate_is_silent_without_a_flag(tmp_path: Path) -> None:
    quiet = audit_json()
    quiet["probes"] = [{**e, "flagged": False} for e in quiet["probes"]]
    for section in (None, quiet):
        report = audited(tmp_path, section)
        code, _, err = invoke(
            "calibrate", str(report), "--target-risk", "0.5", "--out", str(tmp_path / "p.json")
        )
        assert (code, err) == (0, "")


def test_infer_warns_and_its_json_stays_on_stdout(tmp_path: Path) -> None:
    report = audited(tmp_path, audit_json())
    code, out, err = invoke("infer", str(report), "--labels", str(labels(tmp_path)), "--json")
    assert code == 0, err
    assert err.startswith(
        f"warning: the judge audit flagged {NAMED}: infer (its corrected rates) relies on them"
    )
    assert orjson.loads(out)["estimates"]  # the JSON itself is unchanged
    code, _, err = invoke("infer", str(REPORT), "--labels", str(labels(tmp_path)))
    assert (code, err) == (0, "")
