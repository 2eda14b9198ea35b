"""Two reports of traces side by side (docs/semantics.md §8a): a changed first failing step is
a change in the diff (fixed or broken against its label), the trace figures are metric
deltas, a gate rule on the first failing step pairs traces on it, and ``infer`` estimates
per hops and turns slice."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import orjson

from ragbatch.compare import diff_markdown, diff_reports, gate, infer, parse_rules
from ragbatch.compare._gate import default_row_path, row_outcomes
from ragbatch.report import Report

ROOT = Path(__file__).resolve().parents[2]
REPORT = ROOT / "reports/expected-report-traces.json"
ACCURACY = "traces.firstFailingStepAccuracy.accuracy"


def report() -> dict[str, Any]:
    data: dict[str, Any] = orjson.loads(REPORT.read_bytes())
    return data


def moved(data: dict[str, Any], row_id: str, step: int, match: bool) -> dict[str, Any]:
    """``data`` with one trace's first failing step moved (same diagnosis)."""
    out = copy.deepcopy(data)
    row = next(r for r in out["rows"] if r["id"] == row_id)
    row["firstFailingStep"] = row["decidingStep"] = step
    row["firstFailingStepMatch"] = match
    return out


def test_a_changed_first_failing_step_is_a_change_against_its_label() -> None:
    a = report()
    b = moved(a, "second-hop-misses", 1, False)
    (flip,) = diff_reports(a, b).flipped
    assert (flip.id, flip.before, flip.after, flip.change) == (
        "second-hop-misses", "RETRIEVAL_MISS", "RETRIEVAL_MISS", "broken")  # fmt: skip
    assert (flip.before_step, flip.after_step) == (2, 1)
    (back,) = diff_reports(b, a).flipped
    assert back.change == "fixed"
    text = diff_markdown(diff_reports(a, b), "main", "change")
    assert "| second-hop-misses | RETRIEVAL_MISS (step 2) | RETRIEVAL_MISS (step 1) | " in text
    # a step moved where no label says which is right: changed
    c = moved(a, "second-hop-misses", 1, True)
    c_row = next(r for r in c["rows"] if r["id"] == "second-hop-misses")
    del c_row["firstFailingStepMatch"]
    assert [f.change for f in diff_reports(a, c).flipped] == ["changed"]
    assert diff_reports(a, a).flipped == []


def test_the_trace_figures_are_metric_deltas_of_a_diff() -> None:
    a = report()
    b = copy.deepcopy(a)
    b["traces"]["firstFailingStepAccuracy"]["accuracy"] = 0.5
    deltas = {d.path: d for d in diff_reports(a, b).deltas}
    assert deltas[ACCURACY].delta == 0.5 - a["traces"]["firstFailingStepAccuracy"]["accuracy"]
    assert "traces.wastedHops.rate" in deltas
    rows = orjson.loads((ROOT / "reports/expected-report.json").read_bytes())
    assert not [d for d in diff_reports(rows, rows).deltas if d.path.startswith("traces.")]


def test_a_gate_rule_on_the_first_failing_step_pairs_traces_on_it() -> None:
    assert default_row_path(ACCURACY) == "firstFailingStepMatch"
    a = report()
    outcomes = row_outcomes(a, "firstFailingStepMatch")
    assert outcomes == {r["id"]: float(r["firstFailingStepMatch"]) for r in a["rows"]}
    worse = copy.deepcopy(a)
    worse["traces"]["firstFailingStepAccuracy"]["accuracy"] = 0.25
    for row in worse["rows"][:5]:
        row["firstFailingStepMatch"] = False
    rules = parse_rules([{"path": ACCURACY, "maxDrop": 0.02}])
    (result,) = gate(worse, a, rules, defaults=False).rules
    assert (result.test, result.worse, result.better, result.paired_rows) == (
        "mcnemar-exact", 5, 0, len(a["rows"]))  # fmt: skip
    assert result.status == "not-significant"  # 5 of 8: p = 0.0625


def test_infer_estimates_per_hops_and_turns_slice() -> None:
    typed = Report.model_validate_json(REPORT.read_bytes())
    lines = [
        {
            "id": r.id,
            "human": {"diagnosis": r.diagnosis if r.diagnosis != "JUDGE_UNCERTAIN" else "PASS"},
        }
        for r in typed.rows
    ]
    result = infer(typed, lines)
    sliced = {(e.slice["dimension"], e.slice["value"]) for e in result.estimates if e.slice}
    hops = (
        {s.value for s in typed.slices.slices if s.dimension == "hops"} if typed.slices else set()
    )
    assert {("hops", v) for v in hops} <= sliced and ("turns", "1") in sliced
    assert not {d for d, _ in sliced} - {"hops", "turns"}  # no metadata field in this run
