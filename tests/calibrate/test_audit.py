"""Human audit: the stratified sample and judge-human agreement (docs/semantics.md §6)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest
from typer.testing import CliRunner

from ragbatch.calibrate._audit import (
    agreement,
    audit_sample,
    cohen_kappa,
    instructions_line,
    jsonl_bytes,
    row_texts,
)
from ragbatch.cli._app import app
from ragbatch.core._errors import ConfigError
from ragbatch.data._jsonl import JsonlReader

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
    by_stratum = {line["stratum"]: line["inclusionProbability"] for line in sample}
    assert by_stratum == {
        "PASS/auto": 50 / 500,
        "CONFLICTING_EVIDENCE/auto": 23 / 230,
        "RETRIEVAL_MISS/auto": 15 / 150,
        "JUDGE_UNCERTAIN/fallback": 10 / 109,
        "ANSWER_INCORRECT/auto": 1 / 10,
        "GENERATOR_UNGROUNDED/auto": 1 / 1,
    }
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


def test_unlabelled_sample_is_a_config_error_saying_what_was_expected() -> None:
    rows = [row(i, "PASS", "auto") for i in range(3)]
    with pytest.raises(ConfigError) as info:
        agreement(rows, [label(i, None) for i in range(3)], "sample.jsonl")
    assert str(info.value) == (
        "sample.jsonl: no human labels to compare: 3 lines, 3 of them rows of the report, none "
        'with human.diagnosis or a human.judgments value set; expected lines like {"id": ..., '
        '"human": {"diagnosis": one of PASS, RETRIEVAL_MISS, RETRIEVAL_INSUFFICIENT, '
        "CONFLICTING_EVIDENCE, GENERATOR_UNGROUNDED, ANSWER_IRRELEVANT, ANSWER_INCORRECT, "
        'JUDGE_UNCERTAIN or null, "judgments": {"groundedness": true, ...}}} with at least one '
        "value filled in, as written by ragbatch audit-sample and completed by a person"
    )
    with pytest.raises(ConfigError, match="0 lines, 0 of them rows"):
        agreement(rows, [])


def test_judgment_labels_without_a_diagnosis_warn() -> None:
    rows = [row(i, "PASS", "auto") for i in range(3)]
    result = agreement(rows, [label(i, None, groundedness=False) for i in range(3)])
    assert result.decided == 0 and result.per_judgment["groundedness"].count == 3
    assert result.warning is not None and "fill in human.diagnosis" in result.warning


def test_the_instructions_line_is_skipped() -> None:
    rows = [row(0, "PASS", "auto")]
    result = agreement(rows, [instructions_line(), label(0, "PASS")])
    assert (result.labelled, result.agreed, result.unmatched) == (1, 1, [])


def test_sample_lines_carry_question_contexts_and_answer() -> None:
    rows = [row(0, "PASS", "auto"), row(1, "PASS", "auto")]
    texts = {
        f"r000{i}": row_texts(f"q{i}?", [{"id": "c1", "text": f"ctx {i}"}], f"a{i}")
        for i in range(2)
    }
    first, second = audit_sample(rows, 1.0, seed=0, texts=texts)
    assert list(first)[:4] == ["id", "question", "contexts", "answer"]
    assert (first["question"], first["answer"]) == ("q0?", "a0")
    assert second["contexts"] == [{"id": "c1", "text": "ctx 1"}]
    with pytest.raises(ConfigError, match="row r0001 of the report is not in the dataset"):
        audit_sample(rows, 1.0, seed=0, texts={"r0000": texts["r0000"]})


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


# -- the commands --------------------------------------------------------------------------------


def cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_audit_sample_file_has_instructions_then_rows_to_label(tmp_path: Path) -> None:
    sample = tmp_path / "sample.jsonl"
    dataset = ROOT / "datasets" / "rag-fixture.jsonl"
    code, out, _ = cli(
        "audit-sample", str(ROOT / "reports/expected-report.json"), "--dataset", str(dataset),
        "--rate", "0.1", "--seed", "7", "--out", str(sample),
    )  # fmt: skip
    assert (code, out) == (
        0,
        f"wrote 8 rows to label to {sample} (instructions on its first line)\n",
    )
    first, *lines = [orjson.loads(line) for line in sample.read_bytes().splitlines()]
    assert list(first) == ["instructions", "sample"]
    report = orjson.loads((ROOT / "reports/expected-report.json").read_bytes())
    assert first["sample"]["datasetSha256"] == report["dataset"]["sha256"]
    assert (first["sample"]["rate"], first["sample"]["seed"]) == (0.1, 7)
    assert sum(s["sampled"] for s in first["sample"]["strata"].values()) == 8
    assert first["instructions"].startswith("Label every line below this one. Read the question")
    assert "human.diagnosis" in first["instructions"] and "JUDGE_UNCERTAIN" in first["instructions"]
    rows = {r.id: r for r in JsonlReader(dataset)}
    assert len(lines) == 8
    for line in lines:
        source = rows[line["id"]]
        assert line["question"] == source.question and line["answer"] == source.answer
        assert line["contexts"] == [{"id": c.id, "text": c.text} for c in source.contexts]
        assert line["human"]["diagnosis"] is None
        stratum = first["sample"]["strata"][line["stratum"]]
        assert line["inclusionProbability"] == stratum["sampled"] / stratum["rows"]
        assert line["stratum"] == f"{line['diagnosis']}/{line['route']}"
        assert list(line)[-1] == "human"
    # unfilled, the file has no labels: exit 2 saying what was expected
    code, out, err = cli("agreement", str(ROOT / "reports/expected-report.json"), str(sample))
    assert code == 2 and out == ""
    assert err.startswith(f"error: {sample}: no human labels to compare: 8 lines, 8 of them rows")
    assert err.count("\n") == 1 and 'expected lines like {"id": ..., "human": {"diagnosis"' in err
    # filled in with the judge's own verdicts: full agreement, exit 0
    for line in lines:
        line["human"]["diagnosis"] = line["diagnosis"]
    sample.write_bytes(jsonl_bytes([first, *lines]))
    code, out, err = cli("agreement", str(ROOT / "reports/expected-report.json"), str(sample))
    assert code == 0 and out.startswith("agreement 100.0% on 7 decided rows"), out + err


def test_audit_sample_refuses_another_dataset(tmp_path: Path) -> None:
    dataset = ROOT / "datasets" / "rag-fixture.jsonl"
    code, _, err = cli(
        "audit-sample", str(ROOT / "reports/expected-report-claims.json"),
        "--dataset", str(dataset), "--out", str(tmp_path / "s.jsonl"),
    )  # fmt: skip
    assert (code, err) == (
        2,
        f"error: {dataset} is not the dataset the report was run on (its sha256 differs from "
        "the report's dataset.sha256); pass that dataset with --dataset\n",
    )
    assert not (tmp_path / "s.jsonl").exists()
