"""`ragbatch infer` and `gate --labels`: labels joined to the report, mismatches, exit codes."""

from __future__ import annotations

import copy
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import orjson
import pytest
from typer.testing import CliRunner

from ragbatch.calibrate._audit import audit_sample, instructions_line, jsonl_bytes, sample_header
from ragbatch.cli._app import app
from ragbatch.compare._inference import infer
from ragbatch.core._errors import ConfigError
from ragbatch.report._html import report_html
from ragbatch.report._markdown import report_markdown
from ragbatch.report._models import Report, report_bytes

ROOT = Path(__file__).resolve().parents[2]
REPORT = ROOT / "reports/expected-report.json"
DATASET = ROOT / "datasets/rag-fixture.jsonl"
DATA: dict[str, Any] = orjson.loads(REPORT.read_bytes())


def labelled(
    rate: float, seed: int = 0, say: Any = None, data: dict[str, Any] = DATA
) -> list[dict[str, Any]]:
    """An audit sample of the report filled in: the judge's own verdict (PASS for an
    uncertain row) unless ``say(line)`` gives the human's diagnosis; groundedness as judged."""
    lines = audit_sample(data["rows"], rate, seed)
    for line in lines:
        judged = line["diagnosis"] if line["diagnosis"] != "JUDGE_UNCERTAIN" else "PASS"
        line["human"]["diagnosis"] = say(line) if say is not None else judged
        line["human"]["judgments"]["groundedness"] = line["judgments"]["groundedness"] >= 0.5
    header = sample_header(data["dataset"]["sha256"], rate, seed, lines)
    return [instructions_line(header), *lines]


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def write(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.write_bytes(jsonl_bytes(lines))
    return path


def test_labels_that_agree_with_the_judge_give_its_rates_with_intervals() -> None:
    result = infer(Report.model_validate(DATA), labelled(0.3))
    assert result.sample == "stratified" and result.labelled_rows == 14
    by = {(e.target, e.mode): e for e in result.estimates if e.slice is None}
    fail = by[("anyFailure", "jev-only")]
    ok = [r for r in DATA["rows"] if r["status"] == "ok"]
    failing = sum(r["diagnosis"] not in ("PASS", "JUDGE_UNCERTAIN") for r in ok)
    assert fail.judge_rate == failing / len(ok) and fail.rows == len(ok) == 48
    # humans agree with every auto verdict: the stratified estimate is the judge's rate
    assert fail.estimate == pytest.approx(fail.judge_rate)
    assert fail.low < fail.estimate < fail.high
    assert fail.high - fail.low < fail.labels_only.high - fail.labels_only.low
    assert ("judgment:groundedness", "jev-only") in by
    assert ("diagnosis:PASS", "cascade") in by


def human_or_judge(line: dict[str, Any]) -> str:
    """People call every row the judge passed a retrieval miss, and agree on the rest."""
    if line["diagnosis"] == "PASS":
        return "RETRIEVAL_MISS"
    return str(line["diagnosis"]) if line["diagnosis"] != "JUDGE_UNCERTAIN" else "PASS"


def test_a_judge_that_understates_failures_is_corrected() -> None:
    # The corrected failure rate rises by the PASS stratum's whole share, and the judge's raw
    # rate lies outside the interval.
    lines = labelled(1.0, say=human_or_judge)
    fail = next(
        e
        for e in infer(Report.model_validate(DATA), lines).estimates
        if (e.target, e.mode) == ("anyFailure", "jev-only")
    )
    ok = [r for r in DATA["rows"] if r["status"] == "ok"]
    passing = sum(r["diagnosis"] == "PASS" for r in ok) / len(ok)
    assert fail.estimate == pytest.approx(fail.judge_rate + passing)
    assert not fail.low <= fail.judge_rate <= fail.high
    assert fail.high - fail.low == pytest.approx(0.0)  # every row labelled: nothing unknown


def test_labels_without_inclusion_probabilities_are_a_uniform_sample() -> None:
    lines = labelled(0.3)
    for line in lines[1:]:
        del line["inclusionProbability"], line["stratum"]
    result = infer(Report.model_validate(DATA), lines[1:])
    assert result.sample == "uniform"


def test_metadata_slices_get_their_own_figures() -> None:
    data = copy.deepcopy(DATA)
    topics = sorted({r["metadata"]["topic"] for r in data["rows"]})
    data["slices"]["slices"] += [
        {"dimension": "topic", "value": t, "rows": 1, "metrics": {}, "deltas": {}, "flag": False}
        for t in topics
    ]
    result = infer(Report.model_validate(data), labelled(1.0))
    sliced = [e for e in result.estimates if e.slice is not None]
    assert {e.slice["value"] for e in sliced if e.slice} <= set(topics)
    history = [
        e for e in sliced if e.slice == {"dimension": "topic", "value": "history"}
    ]  # fmt: skip
    in_topic = [r for r in data["rows"] if r["status"] == "ok"]
    in_topic = [r for r in in_topic if r["metadata"]["topic"] == "history"]
    assert history and all(e.rows == len(in_topic) for e in history)
    assert not any(e.target.startswith("judgment:") for e in sliced)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda ls: ls[0]["sample"].update(datasetSha256="ab" * 32),
            "sampled from another dataset",
        ),
        (lambda ls: ls[1].update(id="nope"), "1 labelled ids are not successful rows"),
        (lambda ls: ls[1].update(stratum="PASS/fallback"), "was sampled in stratum PASS/fallback"),
        (lambda ls: ls[1].update(inclusionProbability=0), "inclusionProbability must be in"),
        (lambda ls: ls.append(dict(ls[1])), "rows labelled twice"),
        (
            lambda ls: ls[0]["sample"]["strata"]["PASS/auto"].update(rows=99),
            "drawn from another run: stratum PASS/auto had 99 rows, the report has 11",
        ),
    ],
)
def test_a_sample_of_another_report_is_refused(change: Any, message: str) -> None:
    lines = labelled(0.3)
    change(lines)
    with pytest.raises(ConfigError, match=message):
        infer(Report.model_validate(DATA), lines)


def test_infer_cli_json_names_and_outputs(tmp_path: Path) -> None:
    labels = write(tmp_path / "l.jsonl", labelled(0.3))
    out, md, html = tmp_path / "r.json", tmp_path / "r.md", tmp_path / "r.html"
    code, stdout, err = invoke(
        "infer", str(REPORT), "--labels", str(labels), "--json", "--dataset", str(DATASET),
        "--target-width", "0.1", "--out", str(out), "--markdown", str(md), "--html", str(html),
    )  # fmt: skip
    assert code == 0, err
    data = orjson.loads(stdout)
    first = data["estimates"][0]
    assert list(first)[:10] == [
        "target", "mode", "slice", "judgeRate", "estimate", "low", "high", "labels",
        "labelsOnly", "rows",
    ]  # fmt: skip
    assert (first["target"], first["mode"], first["slice"]) == ("diagnosis:PASS", "jev-only", None)
    assert set(first["labelsOnly"]) == {"estimate", "low", "high"}
    assert data["version"] == "1" and data["moreLabels"] > 0
    written = orjson.loads(out.read_bytes())
    assert written["inference"]["estimates"][0]["target"] == "diagnosis:PASS"
    # the report is the original one plus the section: the rest byte-identical
    del written["inference"]
    assert report_bytes(Report.model_validate(written)) == REPORT.read_bytes()
    assert "Corrected rates (human labels)" in md.read_text()
    assert 'id="inference"' in html.read_text() and "<svg" in html.read_text()


def test_views_have_no_inference_section_without_labels() -> None:
    report = Report.model_validate(DATA)
    assert "Corrected rates" not in report_markdown(report)
    assert 'id="inference"' not in report_html(report)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ("sha", "was sampled from another dataset"),
        ("id", "labelled ids are not successful rows of the report (nope)"),
        ("json", ":3: not valid JSON"),
        ("unfilled", "no human labels: fill in human.diagnosis or human.judgments"),
    ],
)
def test_infer_cli_mismatch_is_one_line_exit_2(tmp_path: Path, edit: str, message: str) -> None:
    lines = labelled(0.3)
    if edit == "sha":
        lines[0]["sample"]["datasetSha256"] = "0" * 64
    if edit == "id":
        lines[1]["id"] = "nope"
    if edit == "unfilled":
        lines = [lines[0], *audit_sample(DATA["rows"], 0.3, 0)]
    path = write(tmp_path / "l.jsonl", lines)
    if edit == "json":
        raw = path.read_bytes().splitlines()
        raw[2] = b"{not json"
        path.write_bytes(b"\n".join(raw))
    code, stdout, err = invoke("infer", str(REPORT), "--labels", str(path))
    assert (code, stdout) == (2, "")
    assert err.startswith("error: ") and err.count("\n") == 1 and message in err, err


def test_infer_cli_checks_the_dataset(tmp_path: Path) -> None:
    labels = write(tmp_path / "l.jsonl", labelled(0.3))
    other = tmp_path / "other.jsonl"
    other.write_bytes(DATASET.read_bytes() + b"\n\n")
    code, _, err = invoke("infer", str(REPORT), "--labels", str(labels), "--dataset", str(other))
    assert code == 2 and "is not the dataset the report was run on" in err


def test_audit_sample_plan_counts_labels(tmp_path: Path) -> None:
    code, out, err = invoke("audit-sample", str(REPORT), "--plan", "--target-width", "0.1")
    assert code == 0, err
    assert out.startswith("label about ") and "for ±0.1 at 95% on the any-failure rate" in out
    labels = write(tmp_path / "l.jsonl", labelled(0.3))
    code, out, err = invoke(
        "audit-sample", str(REPORT), "--plan", "--target-width", "0.1", "--labels", str(labels)
    )
    assert code == 0 and "more rows (now 14)" in out, out + err


# -- the gate on corrected rates ----------------------------------------------------------


def gate(tmp_path: Path, *extra: str) -> tuple[int, str, str]:
    junit = tmp_path / "j.xml"
    return invoke("gate", str(REPORT), "--baseline", str(REPORT), "--junit", str(junit), *extra)


def test_gate_passes_when_corrected_rates_hold(tmp_path: Path) -> None:
    labels = write(tmp_path / "l.jsonl", labelled(1.0))
    code, out, err = gate(tmp_path, "--labels", str(labels), "--baseline-labels", str(labels))
    assert code == 0, out + err
    assert "### Corrected rates (human labels): PASS" in out


def test_gate_fails_when_the_corrected_failure_rate_rose(tmp_path: Path) -> None:
    labels = write(tmp_path / "l.jsonl", labelled(1.0))
    better = labelled(1.0, say=lambda line: "PASS")  # the baseline's rows were all fine
    base = write(tmp_path / "b.jsonl", better)
    code, out, _ = gate(tmp_path, "--labels", str(labels), "--baseline-labels", str(base))
    assert code == 1 and "### Corrected rates (human labels): FAIL" in out
    suite = ET.parse(tmp_path / "j.xml").getroot().find("testsuite")
    assert suite is not None
    failed = [c.get("name") for c in suite if c.find("failure") is not None]
    assert "Jev-only any-failure rate (corrected)" in failed


def test_gate_is_undecided_with_too_few_labels(tmp_path: Path) -> None:
    labels = write(tmp_path / "l.jsonl", labelled(0.2))
    code, out, err = gate(tmp_path, "--labels", str(labels))
    assert code == 6, out + err
    assert "### Corrected rates (human labels): UNDECIDED" in out
    assert "label about " in out and "more rows to decide" in out
    assert "The baseline has no labels" in out
    suite = ET.parse(tmp_path / "j.xml").getroot().find("testsuite")
    assert suite is not None
    skipped = [c.find("skipped") for c in suite if c.find("skipped") is not None]
    assert any("UNDECIDED" in (s.get("message") or "") for s in skipped if s is not None)


def test_gate_baseline_labels_need_labels(tmp_path: Path) -> None:
    labels = write(tmp_path / "l.jsonl", labelled(1.0))
    code, out, err = gate(tmp_path, "--baseline-labels", str(labels))
    assert (code, out) == (2, "") and "--baseline-labels needs --labels" in err


def test_evaluation_infer_takes_a_labels_file_or_lines(tmp_path: Path) -> None:
    from ragbatch._api import Evaluation

    lines = labelled(0.3)
    evaluation = Evaluation(report=Report.model_validate(DATA))
    from_lines = evaluation.infer(lines, target_width=0.1)
    from_file = evaluation.infer(write(tmp_path / "l.jsonl", lines), target_width=0.1)
    assert from_lines == from_file == infer(Report.model_validate(DATA), lines, 0.95, 0.1)
    assert from_lines.more_labels is not None and from_lines.target_width == 0.1


def test_gate_uses_the_baselines_own_inference_section(tmp_path: Path) -> None:
    fine = write(tmp_path / "fine.jsonl", labelled(1.0, say=lambda line: "PASS"))
    base = tmp_path / "base.json"
    code, _, err = invoke("infer", str(REPORT), "--labels", str(fine), "--out", str(base))
    assert code == 0, err
    labels = write(tmp_path / "l.jsonl", labelled(1.0))
    result = CliRunner().invoke(
        app, ["gate", str(REPORT), "--baseline", str(base), "--labels", str(labels)]
    )
    assert result.exit_code == 1, result.stdout + result.stderr
    assert "Corrected rates (human labels): FAIL" in result.stdout
    assert "The baseline has no labels" not in result.stdout
