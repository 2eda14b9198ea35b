"""Golden reports: the CLI's output on committed fixtures is byte-equal to the committed files.

To refresh on purpose (and review the diff):
    ragbatch run --out reports/expected-report.json
    ragbatch run datasets/claims-fixture.jsonl --groundedness claims --out reports/expected-report-claims.json
    ragbatch run datasets/golden-fixture.jsonl --slice-by docType --out reports/expected-report-golden.json
    python -m ragbatch.testing.record          # cache/ + reports/expected-report-jev.json
    ragbatch schema
"""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson
from typer.testing import CliRunner

from ragbatch.cli._app import app
from ragbatch.report._models import Report, report_schema

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "datasets/rag-fixture.jsonl"
PRICING = ROOT / "pricing/typesafe-2026-12.json"


def run(*args: str) -> int:
    result = CliRunner().invoke(app, ["run", *args, "--pricing", str(PRICING), "--quiet"])
    return result.exit_code


def test_mock_report_matches_golden_file(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    assert run(str(FIXTURE), "--out", str(out)) == 0
    assert out.read_bytes() == (ROOT / "reports/expected-report.json").read_bytes()


def test_claims_report_matches_golden_file(tmp_path: Path) -> None:
    out = tmp_path / "claims.json"
    dataset = ROOT / "datasets/claims-fixture.jsonl"
    assert run(str(dataset), "--out", str(out), "--groundedness", "claims") == 0
    assert out.read_bytes() == (ROOT / "reports/expected-report-claims.json").read_bytes()


def test_golden_set_report_matches_golden_file(tmp_path: Path) -> None:
    out = tmp_path / "golden.json"
    dataset = ROOT / "datasets/golden-fixture.jsonl"
    assert run(str(dataset), "--out", str(out), "--slice-by", "docType") == 0
    assert out.read_bytes() == (ROOT / "reports/expected-report-golden.json").read_bytes()
    r = orjson.loads(out.read_bytes())
    ranking = r["retrievalRanking"]
    assert ranking["rows"] >= 50 and set(ranking["at"]) == {"1", "3", "5", "10"}
    assert set(ranking["at"]["10"]) == {"hit", "recall", "precision", "contextPrecision", "ndcg"}
    assert {"containsPassRate", "mustNotContainPassRate"} <= set(r["answerChecks"])
    abstention = r["modes"]["jevOnly"]["abstention"]
    assert {"accuracy", "falseAbstentionRate", "falseAnswerRate"} <= set(abstention)
    assert abstention["falseAnswerRate"] > 0  # the fixture plants false answers
    flagged = {(s["dimension"], s["value"]) for s in r["slices"]["slices"] if s["flag"]}
    assert ("docType", "table") in flagged  # the planted bad slice
    labelled = [row for row in r["rows"] if "retrievalRanking" in row]
    assert len(labelled) == ranking["rows"] and all("traceId" in row for row in r["rows"])
    layers = [f["layer"] for f in r["diagnostics"]]
    assert layers == sorted(layers, key=["retrieval", "generation"].index)  # upstream first


def test_same_bytes_at_any_concurrency(tmp_path: Path) -> None:
    outputs = []
    for concurrency in ("1", "7", "32"):
        out = tmp_path / f"r{concurrency}.json"
        assert run(str(FIXTURE), "--out", str(out), "--concurrency", concurrency) == 0
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1] == outputs[2]


def test_offline_replay_matches_golden_file_without_key_or_network(tmp_path: Path) -> None:
    # The committed cache/ was recorded from the loopback server; no key, no network here.
    # A copy: opening a diskcache directory may touch its SQLite files.
    cache = tmp_path / "cache"
    shutil.copytree(ROOT / "cache", cache)
    out = tmp_path / "replay.json"
    code = run(
        str(FIXTURE),
        "--out", str(out),
        "--provider", "jev",
        "--model", "jev-1.13.0",
        "--offline",
        "--cache-dir", str(cache),
        "--base-url", "http://127.0.0.1:9",  # nothing listens: a request would fail the row
    )  # fmt: skip
    assert code == 0
    assert out.read_bytes() == (ROOT / "reports/expected-report-jev.json").read_bytes()


def test_replayed_judgments_equal_the_mock_judgments() -> None:
    mock = orjson.loads((ROOT / "reports/expected-report.json").read_bytes())
    jev = orjson.loads((ROOT / "reports/expected-report-jev.json").read_bytes())
    keys = ("id", "retrieval", "generation", "diagnosis", "confidence", "route")
    assert [{k: r.get(k) for k in keys} for r in mock["rows"]] == [
        {k: r.get(k) for k in keys} for r in jev["rows"]
    ]
    assert jev["provider"]["answeredBy"] == ["jev-1.13.0"]


def test_golden_report_validates_against_models_and_schema_is_current() -> None:
    data = (ROOT / "reports/expected-report.json").read_bytes()
    Report.model_validate_json(data)
    assert (ROOT / "reports/report.schema.json").read_bytes() == report_schema()


def test_report_has_contract_paths() -> None:
    r = orjson.loads((ROOT / "reports/expected-report.json").read_bytes())
    assert r["dataset"]["rows"] == 48 and len(r["dataset"]["sha256"]) == 64
    assert r["decisions"]["variant"] == "mixed"
    assert r["pricing"]["version"] == "2026-12-01"
    for name in ("jevOnly", "baseline", "cascade"):
        mode = r["modes"][name]
        for path in (
            ("classification", "accuracy"),
            ("classification", "overallAccuracy"),
            ("classification", "perLabel"),
            ("calibration", "ece"),
            ("calibration", "buckets"),
            ("selective", "aurc"),
            ("selective", "curve"),
            ("latency", "p50Ms"),
            ("latency", "p95Ms"),
            ("usage",),
            ("cost",),
        ):
            node = mode
            for key in path:
                node = node[key]
    components = r["modes"]["jevOnly"]["components"]
    for key in ("chunkRelevance", "contextSufficiency", "contextConflict"):
        assert set(components["retrieval"][key]) >= {"count", "accuracy", "brier", "ece"}
    for key in ("answerRelevance", "groundedness", "contradiction", "correctness"):
        assert set(components["generation"][key]) >= {"count", "accuracy", "brier", "ece"}
    cascade = r["modes"]["cascade"]
    assert {"fallbackRate", "primaryResolvedRate", "primaryFailureRate", "endToEnd"} <= set(cascade)
    row = r["rows"][0]
    for key in ("id", "decisionVariant", "status", "retrieval", "generation", "diagnosis",
                "confidence", "route", "model", "latencyMs", "usage"):  # fmt: skip
        assert key in row
    assert r["rows"][-1]["id"] == "rag-048"  # input order


def test_fixture_covers_what_it_should() -> None:
    r = orjson.loads((ROOT / "reports/expected-report.json").read_bytes())
    jev = r["modes"]["jevOnly"]
    predicted = [row["diagnosis"] for row in r["rows"]]
    for label in jev["classification"]["confusion"]["labels"]:
        assert predicted.count(label) >= 3, label
    assert len(set(predicted)) == 8
    assert 0 < jev["classification"]["accuracy"] < 1
    assert 0 < r["modes"]["baseline"]["classification"]["accuracy"] < 1
    assert jev["calibration"]["ece"] > 0 and jev["selective"]["aurc"] > 0
    assert jev["routes"]["fallback"] >= 3
    assert r["modes"]["jevOnly"]["components"]["generation"]["correctness"]["count"] > 0
