"""Golden-set extras end to end (docs/semantics.md §1a, §3a, §6): source authority,
counterfactuals, drift, YAML golden sets, trace links."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import orjson
import pytest
from typer.testing import CliRunner

from ragbatch.cli._app import app
from ragbatch.core._questions import build_request
from ragbatch.data._jsonl import JsonlReader

ROOT = Path(__file__).resolve().parent.parent
PRICING = str(ROOT / "pricing/typesafe-2026-12.json")
SAMPLES = ROOT / "datasets/samples"


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, [*args])
    return result.exit_code, result.stdout + result.stderr


def evaluate(tmp_path: Path, *args: str) -> dict[str, Any]:
    out = tmp_path / "r.json"
    code, text = run("run", *args, "--out", str(out), "--pricing", PRICING, "--quiet")
    assert code == 0, text
    data: dict[str, Any] = orjson.loads(out.read_bytes())
    return data


def test_authority_is_reported_apart_and_never_judged(tmp_path: Path) -> None:
    dataset = SAMPLES / "authority-sample.jsonl"
    for row in JsonlReader(dataset):
        assert b"authority" not in build_request(row, "m").body()
    report = evaluate(tmp_path, str(dataset))
    assert report["authority"]["supportedOnlyByLowAuthority"] == 1
    assert report["authority"]["ids"] == ["a1"]
    flags = {r["id"]: r["lowAuthoritySupport"] for r in report["rows"]}
    assert flags == {"a1": True, "a2": False}
    values = {s["value"] for s in report["slices"]["slices"] if s["dimension"] == "authority"}
    assert values == {"official", "user-generated"}


def test_claim_support_is_sliced_by_authority() -> None:
    report = orjson.loads((ROOT / "reports/expected-report-claims.json").read_bytes())
    slices = report["modes"]["jevOnly"]["claims"]["slices"]["authority"]
    assert {"official", "user-generated"} <= {s["value"] for s in slices}
    claims = [c for row in report["rows"] for c in row.get("claims", [])]
    assert any(c.get("authority") for c in claims)


def test_counterfactual_rows_report_refusals_next_to_the_originals(tmp_path: Path) -> None:
    golden = ROOT / "datasets/golden-fixture.jsonl"
    cf = tmp_path / "cf.jsonl"
    code, text = run("counterfactual", str(golden), "--out", str(cf), "--keep-mock")
    assert code == 0 and "wrote 44 counterfactual rows" in text, text
    rows = list(JsonlReader(cf))
    assert all(
        r.golden and r.golden.counterfactual_of and r.golden.expected_abstention for r in rows
    )
    assert all(r.id == f"{r.golden.counterfactual_of}#cf" for r in rows if r.golden)
    both = tmp_path / "both.jsonl"
    both.write_bytes(golden.read_bytes() + cf.read_bytes())
    report = evaluate(tmp_path, str(both))
    section = report["counterfactual"]
    assert section["counterfactual"]["count"] == 44 and section["original"]["count"] == 64
    # the kept answers were not regenerated: they answer, so the False Answer Rate is high
    assert section["counterfactual"]["falseAnswerRate"] > section["original"]["falseAnswerRate"]


QUANTITIES = (
    "queryTokens", "contextCount", "retrieval.sufficiency", "retrieval.conflict",
    "retrieval.bestChunk", "generation.relevance", "generation.groundedness",
    "generation.contradiction", "generation.correctness", "generation.abstention",
)  # fmt: skip


def per_row(report: dict[str, Any], name: str) -> list[float]:
    """One quantity's values over the report's rows, read here from the JSON by hand."""
    found = []
    for row in report["rows"]:
        chunks = row.get("retrieval", {}).get("chunkRelevance")
        if name == "contextCount":
            value = len(chunks) if chunks is not None else None
        elif name == "retrieval.bestChunk":
            value = max(chunks.values()) if chunks else None
        elif "." in name:
            group, key = name.split(".")
            value = row.get(group, {}).get(key)
        else:
            value = row.get(name)
        if isinstance(value, int | float):
            found.append(float(value))
    return found


def ks_by_hand(a: list[float], b: list[float]) -> float:
    return max(
        abs(sum(v <= x for v in a) / len(a) - sum(v <= x for v in b) / len(b)) for x in a + b
    )


def psi_of_tenths(a: list[float], b: list[float]) -> float:
    """PSI over the bins [0, 0.1), ..., [0.9, 1], an empty bin's share taken as 1e-4."""
    share_a = [sum(min(int(v * 10), 9) == i for v in a) / len(a) or 1e-4 for i in range(10)]
    share_b = [sum(min(int(v * 10), 9) == i for v in b) / len(b) or 1e-4 for i in range(10)]
    return sum((pb - pa) * math.log(pb / pa) for pa, pb in zip(share_a, share_b, strict=True))


def test_diff_reports_distribution_drift(tmp_path: Path) -> None:
    a = ROOT / "reports/expected-report.json"
    b = ROOT / "reports/expected-report-golden.json"
    code, text = run("diff", str(a), str(b))
    assert code == 0, text
    section = text[text.index("### Distribution drift\n") :].splitlines()
    header = "| Quantity | n expected-report.json | n expected-report-golden.json | PSI | KS D | KS p | Flag |"
    table = section[section.index(header) + 2 :]
    cells = {
        line.split(" | ")[0].strip("|` "): line.strip("| ").split(" | ")[1:]
        for line in table[: table.index("")]
    }
    report_a, report_b = orjson.loads(a.read_bytes()), orjson.loads(b.read_bytes())
    both = [q for q in QUANTITIES if per_row(report_a, q) and per_row(report_b, q)]
    assert list(cells) == both and len(both) == 9  # the rag fixture's rows have no abstention
    assert per_row(report_a, "generation.abstention") == []
    assert "- generation.abstention: skipped (so is the abstention rate), missing in report A" in (
        section
    )
    for name, (n_a, n_b, psi, ks, _, flag) in cells.items():
        va, vb = per_row(report_a, name), per_row(report_b, name)
        assert (int(n_a), int(n_b)) == (len(va), len(vb)), name
        assert float(ks) == pytest.approx(ks_by_hand(va, vb), rel=1e-3), name
        if name not in ("queryTokens", "contextCount"):  # those bin at the baseline's deciles
            assert float(psi) == pytest.approx(psi_of_tenths(va, vb), rel=1e-3), name
        assert flag == (
            "drift" if float(psi) >= 0.25 else "moderate" if float(psi) >= 0.1 else "none"
        )
    assert cells["contextCount"][:2] == ["48", "64"]


def test_yaml_golden_set_is_joined_and_sliced(tmp_path: Path) -> None:
    report = evaluate(
        tmp_path,
        str(SAMPLES / "golden_set.yaml"),
        "--format", "golden-yaml",
        "--outputs", str(SAMPLES / "golden-outputs.jsonl"),
    )  # fmt: skip
    assert report["retrievalRanking"]["rows"] > 0
    dims = {s["dimension"] for s in report["slices"]["slices"]}
    assert "expectedClassification" in dims


def test_trace_ids_follow_rows_claims_and_samples(tmp_path: Path) -> None:
    report = evaluate(tmp_path, str(SAMPLES / "authority-sample.jsonl"))
    assert [r["traceId"] for r in report["rows"]] == ["trace-a1", "trace-a2"]
    sample = tmp_path / "sample.jsonl"
    code, text = run(
        "audit-sample", str(tmp_path / "r.json"), "--dataset", str(SAMPLES / "authority-sample.jsonl"),
        "--rate", "1", "--out", str(sample),
    )  # fmt: skip
    assert code == 0, text
    lines = [orjson.loads(line) for line in sample.read_bytes().splitlines()[1:]]
    assert {line["traceId"] for line in lines} == {"trace-a1", "trace-a2"}
