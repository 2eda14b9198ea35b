"""calibrate -> run --policy end to end: the held-out promise holds on fresh rows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
from typer.testing import CliRunner

from ragbatch.cli.app import app
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
    promise = orjson.loads(policy.read_bytes())["heldOut"]
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
