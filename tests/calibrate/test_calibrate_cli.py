"""calibrate -> run --policy end to end: the held-out promise holds on fresh rows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
from typer.testing import CliRunner

from bench import calibrated
from ragbatch.calibrate._bounds import upper_bound
from ragbatch.calibrate._fit import calibrate, policy_bytes
from ragbatch.cli._app import app
from tests.calibrate.test_calibrate import synthetic

ROOT = Path(__file__).resolve().parents[2]
PRICING = str(ROOT / "pricing/typesafe-2026-12.json")


def as_dataset(rows: list[dict[str, Any]], path: Path) -> Path:
    """Report-shaped synthetic rows -> dataset rows whose mock answers are those judgments."""
    lines = []
    for row in rows:
        chunks = row["retrieval"].get("chunkRelevance", {})
        data: dict[str, Any] = {
            "id": row["id"],
            "question": "What does the policy say?",
            "contexts": [{"id": cid, "text": f"Passage {cid}."} for cid in chunks],
            "answer": "It says so.",
            "expected": {"diagnosis": row["expected"]},
            "mock": {"retrieval": row["retrieval"], "generation": row["generation"]},
        }
        if "correctness" in row["generation"]:
            data["referenceAnswer"] = "It says so."
        lines.append(orjson.dumps(data))
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout + result.stderr


def test_calibrated_policy_keeps_its_held_out_promise_on_fresh_rows(tmp_path: Path) -> None:
    rows = synthetic(3000, seed=0)
    fit = as_dataset(rows[:2000], tmp_path / "fit.jsonl")
    fresh = as_dataset(rows[2000:], tmp_path / "fresh.jsonl")
    assert (
        cli("run", str(fit), "--out", str(tmp_path / "fit.json"), "--pricing", PRICING, "--quiet")[
            0
        ]
        == 0
    )
    policy = tmp_path / "policy.json"
    code, text = cli(
        "calibrate", str(tmp_path / "fit.json"), "--target-risk", "0.1", "--out", str(policy)
    )
    assert code == 0, text
    assert (
        "guarantee: with 95% confidence the diagnosis error of the rows Jev decides "
        "automatically is at most 10.0%" in text
    )
    assert "estimates on the 2,000 labelled rows tested: coverage" in text
    assert "per diagnosis (estimates): " in text
    written = orjson.loads(policy.read_bytes())
    promise, guarantee = written["heldOut"], written["guarantee"]
    out = tmp_path / "fresh.json"
    code, text = cli(
        "run",
        str(fresh),
        "--policy",
        str(policy),
        "--out",
        str(out),
        "--pricing",
        PRICING,
        "--quiet",
    )
    assert code == 0, text
    report = orjson.loads(out.read_bytes())
    assert report["policy"]["name"] == "calibrated"
    assert report["policy"]["version"] == orjson.loads(policy.read_bytes())["version"]
    auto = [r for r in report["rows"] if r["route"] == "auto"]
    errors = sum(r["diagnosis"] != r["expected"] for r in auto)
    assert auto, "the policy must automate something"
    assert errors / len(auto) <= promise["riskUpperBound"] + 0.02
    assert guarantee["targetRisk"] == 0.1 and "riskUpperBound" not in guarantee
    assert 1.0 - upper_bound(len(auto) - errors, len(auto), 0.99) <= 0.1  # not refuted


def test_calibrate_refuses_a_tie_block(tmp_path: Path) -> None:
    rows = synthetic(200, seed=1)
    for i, row in enumerate(rows):
        row["retrieval"] = {"chunkRelevance": {"c0": 1.0}, "sufficiency": 1.0, "conflict": 0.0}
        row["generation"] = {"relevance": 1.0, "groundedness": 1.0, "contradiction": 0.0}
        row["expected"] = "PASS" if i % 10 >= 3 else "GENERATOR_UNGROUNDED"  # 30% wrong
    data = as_dataset(rows, tmp_path / "tie.jsonl")
    assert (
        cli("run", str(data), "--out", str(tmp_path / "tie.json"), "--pricing", PRICING, "--quiet")[
            0
        ]
        == 0
    )
    code, text = cli("calibrate", str(tmp_path / "tie.json"), "--out", str(tmp_path / "p.json"))
    assert code == 2
    assert text.startswith("error: ") and "exactly" in text and "30%" in text, text
    assert not (tmp_path / "p.json").exists()


def test_policy_file_tampering_is_refused(tmp_path: Path) -> None:
    code, _ = cli(
        "calibrate",
        str(ROOT / "reports/expected-report-golden.json"),
        "--target-risk",
        "0.1",
        "--out",
        str(tmp_path / "p.json"),
    )
    assert code == 0
    data = orjson.loads((tmp_path / "p.json").read_bytes())
    data["passThreshold"] = 0.5
    (tmp_path / "p.json").write_bytes(orjson.dumps(data))
    code, text = cli("run", "--policy", str(tmp_path / "p.json"), "--out", str(tmp_path / "r.json"))
    assert code == 2 and text.startswith("error: ")


def write_rows(rows: list[dict[str, Any]], path: Path) -> Path:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    return path


def test_a_u_shaped_judge_is_automated_a_third_at_five_percent_risk(tmp_path: Path) -> None:
    """The calibration issue's acceptance: 4,000 rows of a calibrated Beta(0.25, 0.25) judge,
    calibrate at 0.05/0.95, then fresh rows: >= 30% automatic, risk <= 5%."""
    labelled = calibrated.report_rows(4000, 11, "ushape")  # as `ragbatch run` reports them
    fresh = write_rows(calibrated.rows(4000, 12, "ushape", "fresh"), tmp_path / "fresh.jsonl")
    policy = tmp_path / "policy.json"
    policy.write_bytes(policy_bytes(calibrate(labelled, 0.05, 0.95)))
    written = orjson.loads(policy.read_bytes())
    assert written["routing"] == "guarded" and written["guarantee"]["certifiedOn"] == 4000
    out, md = tmp_path / "fresh.json", tmp_path / "fresh.md"
    code, text = cli(
        "run", str(fresh), "--policy", str(policy), "--out", str(out), "--markdown", str(md),
        "--pricing", PRICING,
    )  # fmt: skip
    assert code == 0, text
    report = orjson.loads(out.read_bytes())
    assert report["policy"]["routing"] == "guarded"
    for d in written["guarantee"]["perDiagnosis"]:  # the report leaves out what is null
        d.pop("target")
    assert report["policy"]["guarantee"] == written["guarantee"]
    auto = [r for r in report["rows"] if r["route"] == "auto"]
    risk = sum(r["diagnosis"] != r["expected"] for r in auto) / len(auto)
    assert len(auto) / 4000 >= 0.30 and risk <= 0.05, (len(auto), risk)
    share = f"{len(auto) / 4000:.1%}"
    sentence = f"At ≤ 5% risk (95% confidence) Jev decides {share} of rows automatically"
    assert sentence in text and sentence in md.read_text(encoding="utf-8")
    # both routings side by side on the same rows: showcase's risk never gets near the target
    curves = {c["routing"]: c["points"] for c in report["routingCurves"]["curves"]}
    assert min(p["risk"] for p in curves["showcase"]) > 0.2
    guarded = [p["risk"] for p in curves["guarded"]]
    assert guarded == sorted(guarded) and guarded[0] < 0.01


def test_routing_option(tmp_path: Path) -> None:
    dataset = str(ROOT / "datasets/rag-fixture.jsonl")
    out = tmp_path / "guarded.json"
    code, text = cli("run", dataset, "--routing", "guarded", "--out", str(out), "--quiet")
    assert code == 0, text
    report = orjson.loads(out.read_bytes())
    assert report["policy"]["routing"] == "guarded" and "routingCurves" in report
    default = orjson.loads((ROOT / "reports/expected-report.json").read_bytes())
    assert "routing" not in default["policy"] and "routingCurves" not in default
    showcase = {r["id"]: r for r in default["rows"]}
    for row in report["rows"]:  # guarded decides only what the showcase decides, the same way
        if row["route"] == "auto":
            assert showcase[row["id"]]["diagnosis"] == row["diagnosis"]
    code, text = cli("run", dataset, "--routing", "strict", "--out", str(out), "--quiet")
    assert code == 2 and "error: --routing must be one of showcase, guarded" in text
    policy = tmp_path / "policy.json"
    policy.write_text("{}", encoding="utf-8")
    code, text = cli("run", dataset, "--routing", "guarded", "--policy", str(policy), "--quiet")
    assert code == 2 and "--routing and --policy cannot be used together" in text
