"""Human audit: the stratified sample and judge-human agreement (seed 004)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest

from ragbatch.calibrate.audit import agreement, audit_sample, cohen_kappa, jsonl_bytes
from ragbatch.core.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
REPORT = json.loads((ROOT / "reports" / "expected-report.json").read_text(encoding="utf-8"))
# (diagnosis, route, count): one rare stratum of a single row
STRATA = [
    ("PASS", "auto", 500),
    ("CONFLICTING_EVIDENCE", "auto", 230),
    ("RETRIEVAL_MISS", "auto", 150),
    ("JUDGE_UNCERTAIN", "fallback", 109),
    ("ANSWER_INCORRECT", "auto", 10),
    ("GENERATOR_UNGROUNDED", "auto", 1),
]


def row(i: int, diagnosis: str, route: str, **extra: Any) -> dict[str, Any]:
    return {
        "id": f"r{i:04d}",
        "status": "ok",
        "retrieval": {
            "chunkRelevance": {"c1": 0.9, "c2": 0.3},
            "sufficiency": 0.9,
            "conflict": 0.1,
        },
        "generation": {"relevance": 0.9, "groundedness": 0.3, "contradiction": 0.1},
        "diagnosis": diagnosis,
        "confidence": 0.9,
        "route": route,
        "expected": "PASS",
        **extra,
    }


def population() -> list[dict[str, Any]]:
    rows = [row(0, "PASS", "failed", status="failed")]  # failed rows are never sampled
    for diagnosis, route, n in STRATA:
        rows += [row(len(rows) + i, diagnosis, route) for i in range(n)]
    return rows


def test_sample_covers_every_stratum_proportionally() -> None:
    sample = audit_sample(population(), 0.1, seed=1)
    got = Counter((line["diagnosis"], line["route"]) for line in sample)
    assert got == {
        ("PASS", "auto"): 50,
        ("CONFLICTING_EVIDENCE", "auto"): 23,
        ("RETRIEVAL_MISS", "auto"): 15,
        # 10.9 would round up, but the rare stratum's guaranteed row already took the
        # hundredth place: 10% of 999 rows is 100.
        ("JUDGE_UNCERTAIN", "fallback"): 10,
        ("ANSWER_INCORRECT", "auto"): 1,
        ("GENERATOR_UNGROUNDED", "auto"): 1,  # 0.1 of a row: at least one per stratum
    }
    assert len({line["id"] for line in sample}) == 100
    assert "r0000" not in {line["id"] for line in sample}


def test_largest_remainder_settles_the_rounding() -> None:
    rows = [r for r in population() if r["diagnosis"] != "GENERATOR_UNGROUNDED"]
    got = Counter(line["diagnosis"] for line in audit_sample(rows, 0.1, seed=1))
    assert got["JUDGE_UNCERTAIN"] == 11  # 10.9 rounds up to reach 100 of 998
    assert sum(got.values()) == 100


@pytest.mark.parametrize("rate", [0.05, 0.1, 0.25, 1.0])
def test_sample_size_follows_the_rate(rate: float) -> None:
    rows = population()
    size = len(audit_sample(rows, rate, seed=2))
    ok = len(rows) - 1
    assert round(rate * ok) <= size <= round(rate * ok) + len(STRATA)


def test_sample_is_deterministic_per_seed_and_in_input_order() -> None:
    rows = population()
    first = audit_sample(rows, 0.1, seed=3)
    assert audit_sample(rows, 0.1, seed=3) == first
    assert audit_sample(rows, 0.1, seed=4) != first
    ids = [line["id"] for line in first]
    assert ids == sorted(ids)


def test_sample_lines_are_blind_and_ready_to_fill() -> None:
    rows = [row(0, "PASS", "auto", traceId="t-1", metadata={"topic": "x"})]
    (line,) = audit_sample(rows, 1.0, seed=0)
    assert line["id"] == "r0000" and line["traceId"] == "t-1"
    assert line["metadata"] == {"topic": "x"} and line["confidence"] == 0.9
    assert "expected" not in line and "retrieval" not in line
    assert line["judgments"] == {
        "chunkRelevance": 0.9,
        "contextSufficiency": 0.9,
        "contextConflict": 0.1,
        "answerRelevance": 0.9,
        "groundedness": 0.3,
        "contradiction": 0.1,
    }
    assert line["chunks"] == {"c1": 0.9, "c2": 0.3}
    assert line["human"] == {"diagnosis": None, "judgments": dict.fromkeys(line["judgments"])}
    assert orjson.loads(jsonl_bytes([line]).splitlines()[0]) == line


def test_sample_of_the_golden_report_has_every_stratum() -> None:
    rows = REPORT["rows"]
    strata = {(r["diagnosis"], r["route"]) for r in rows}
    sample = audit_sample(rows, 0.1, seed=0)
    assert {(line["diagnosis"], line["route"]) for line in sample} == strata


def test_rate_must_be_a_share() -> None:
    with pytest.raises(ConfigError, match="--rate"):
        audit_sample(population(), 0.0, seed=0)


# -- agreement ----------------------------------------------------------------------------------


def label(i: int, diagnosis: str | None, **judgments: bool | None) -> dict[str, Any]:
    return {"id": f"r{i:04d}", "human": {"diagnosis": diagnosis, "judgments": judgments}}


def hand_case() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Judge: 5 PASS, 5 CONFLICTING_EVIDENCE (auto) and one fallback row."""
    rows = [row(i, "PASS" if i < 5 else "CONFLICTING_EVIDENCE", "auto") for i in range(10)]
    rows.append(row(10, "JUDGE_UNCERTAIN", "fallback"))
    # Human: agrees on 4 of the PASS rows and 4 of the conflict rows.
    said = ["PASS"] * 4 + ["CONFLICTING_EVIDENCE"] * 5 + ["PASS"]
    labels = [label(i, d) for i, d in enumerate(said)]
    labels.append(label(10, "PASS", groundedness=True))  # judge p = 0.3: disagrees
    labels.append(label(11, "PASS"))  # not in the report
    labels[0]["human"]["judgments"] = {"groundedness": False, "contradiction": False}
    return rows, labels


def test_agreement_and_kappa_on_a_hand_case() -> None:
    rows, labels = hand_case()
    result = agreement(rows, labels)
    assert (result.labelled, result.decided, result.agreed, result.fallback) == (11, 10, 8, 1)
    assert result.agreement == 0.8
    # Chance: judge 5/5, human 5/5 -> 0.5; kappa = (0.8 - 0.5) / 0.5
    assert result.kappa == pytest.approx(0.6)
    assert result.unmatched == ["r0011"]
    groundedness = result.per_judgment["groundedness"]
    assert (groundedness.count, groundedness.agreed) == (2, 1)  # r0000 agrees, r0010 not
    assert result.per_judgment["contradiction"].agreement == 1.0
    assert result.warning is not None and "groundedness 50% (1/2)" in result.warning
    assert "diagnosis" not in result.warning  # exactly 80% is not below 80%


def test_warning_below_eighty_percent() -> None:
    rows, labels = hand_case()
    labels[1]["human"]["diagnosis"] = "RETRIEVAL_MISS"  # 7 of 10
    labels[10]["human"]["judgments"] = {}
    labels[0]["human"]["judgments"] = {}
    result = agreement(rows, labels)
    assert result.agreement == 0.7
    assert result.warning is not None
    assert result.warning.startswith("judge-human agreement below 80%: diagnosis 70% (7/10)")
    assert "re-prompt or re-train" in result.warning


def test_no_warning_when_judge_and_humans_agree() -> None:
    rows = [row(i, "PASS", "auto") for i in range(5)]
    result = agreement(rows, [label(i, "PASS", groundedness=False) for i in range(5)])
    assert result.agreement == 1.0 and result.warning is None
    assert result.kappa is None  # one label on both sides: chance agreement is 1


def test_unlabelled_sample_warns_instead_of_scoring() -> None:
    rows = [row(i, "PASS", "auto") for i in range(3)]
    result = agreement(rows, [label(i, None) for i in range(3)])
    assert result.decided == 0 and result.warning is not None
    assert "fill in human.diagnosis" in result.warning


@pytest.mark.parametrize(
    ("human", "message"),
    [
        ({"diagnosis": "GOOD"}, "is not one of"),
        ({"diagnosis": "PASS", "judgments": {"faithfulness": True}}, "must be one of"),
        ({"diagnosis": "PASS", "judgments": {"groundedness": "yes"}}, "true, false or null"),
    ],
)
def test_bad_labels_are_config_errors(human: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        agreement([row(0, "PASS", "auto")], [{"id": "r0000", "human": human}])


def test_kappa_of_perfect_and_chance_agreement() -> None:
    assert cohen_kappa([("A", "A"), ("B", "B")]) == 1.0
    assert cohen_kappa([("A", "A"), ("A", "B"), ("B", "A"), ("B", "B")]) == 0.0
    assert cohen_kappa([]) is None
