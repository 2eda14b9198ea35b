"""Human audit of multi-step traces (docs/semantics.md §8a): a trace's sample line carries its
steps with their content and the judge's verdicts but no label, people label the trace's
diagnosis and first failing step, and agreement counts both (calibration on traces:
test_trace_calibrate.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from typer.testing import CliRunner

from ragbatch.calibrate._audit import agreement, audit_sample
from ragbatch.calibrate._trace_audit import trace_texts
from ragbatch.cli._app import app
from ragbatch.core import ConfigError, Trace

ROOT = Path(__file__).resolve().parents[2]
REPORT = ROOT / "reports/expected-report-traces.json"
DATASET = ROOT / "datasets/traces.jsonl"


def report() -> dict[str, Any]:
    data: dict[str, Any] = orjson.loads(REPORT.read_bytes())
    return data


def traces() -> dict[str, Trace]:
    items = (Trace.model_validate_json(line) for line in DATASET.read_bytes().splitlines())
    return {t.id: t for t in items}


def keys_of(value: Any) -> set[str]:
    if isinstance(value, dict):
        return set(value) | {k for v in value.values() for k in keys_of(v)}
    if isinstance(value, list):
        return {k for v in value for k in keys_of(v)}
    return set()


def test_a_trace_line_has_its_steps_content_and_verdicts_and_no_label() -> None:
    texts = {t.id: trace_texts(t) for t in traces().values()}
    lines = audit_sample(report()["rows"], 1.0, 0, texts)
    assert len(lines) == len(texts)
    by_id = traces()
    for line in lines:
        trace = by_id[line["id"]]
        # blind: no label at any depth, not even whether the judge's step matched it
        assert {"expected", "firstFailingStepMatch", "mock"}.isdisjoint(keys_of(line))
        assert line["human"] == {"diagnosis": None, "firstFailingStep": None}
        assert list(line)[-3:] == ["stratum", "inclusionProbability", "human"]
        assert [s["index"] for s in line["steps"]] == list(range(len(trace.steps)))
        for step, source in zip(line["steps"], trace.steps, strict=True):
            assert step["kind"] == source.kind
            if source.kind == "retrieval":
                assert step["query"] == source.query
                assert [c["id"] for c in step["contexts"]] == [c.id for c in source.contexts]
            if source.kind in ("user", "answer"):
                assert step["text"] == source.text
        judged = [s for s in line["steps"] if "diagnosis" in s]
        assert judged and all("decisionId" in s for s in judged)


def test_a_report_step_count_other_than_the_dataset_s_is_refused() -> None:
    rows = report()["rows"]
    first = rows[0]["id"]
    texts: dict[str, dict[str, Any]] = {first: {"steps": []}}
    with pytest.raises(ConfigError, match=f"row {first}: the report has 4 steps and the dataset 0"):
        audit_sample(rows[:1], 1.0, 0, texts)


def label(row_id: str, diagnosis: str | None, first: object) -> dict[str, Any]:
    return {"id": row_id, "human": {"diagnosis": diagnosis, "firstFailingStep": first}}


def test_agreement_counts_the_first_failing_step_of_decided_traces() -> None:
    rows = report()["rows"]
    by_id = {r["id"]: r for r in rows}
    labels = [
        label("two-hops-fine", "PASS", "none"),  # agrees: no step failed
        label("second-hop-misses", "RETRIEVAL_MISS", 1),  # the judge says step 2
        label("answer-without-retrieval", "RETRIEVAL_MISS", 1),  # agrees
        label("final-answer-uncertain", "PASS", "none"),  # fallback: no verdict to agree with
    ]
    assert by_id["second-hop-misses"]["firstFailingStep"] == 2
    result = agreement(rows, labels)
    assert (result.labelled, result.decided, result.agreed, result.fallback) == (4, 3, 3, 1)
    f = result.first_failing_step
    assert f is not None and (f.count, f.agreed) == (3, 2)
    assert result.warning is not None and "firstFailingStep 67% (2/3)" in result.warning
    # rows alone: no first-failing-step figure
    assert agreement(rows, labels[:1]).first_failing_step is not None
    golden = orjson.loads((ROOT / "reports/expected-report.json").read_bytes())["rows"]
    only_rows = agreement(golden, [{"id": golden[0]["id"], "human": {"diagnosis": "PASS"}}])
    assert only_rows.first_failing_step is None


@pytest.mark.parametrize(
    ("first", "message"),
    [
        (4, 'human.firstFailingStep must be a step index of the trace (0 to 3) or "none", got 4'),
        (True, "human.firstFailingStep must be a step index of the trace (0 to 3)"),
        ("2", """or "none", got '2'"""),
        (-1, "got -1"),
    ],
)
def test_a_first_failing_step_that_is_no_step_of_the_trace_is_refused(
    first: object, message: str
) -> None:
    with pytest.raises(ConfigError, match="label two-hops-fine: ") as error:
        agreement(report()["rows"], [label("two-hops-fine", None, first)])
    assert message in str(error.value)


def test_a_first_failing_step_on_a_row_is_refused() -> None:
    golden = orjson.loads((ROOT / "reports/expected-report.json").read_bytes())["rows"]
    row_id = golden[0]["id"]
    with pytest.raises(
        ConfigError, match=f"label {row_id}: human.firstFailingStep is for multi-step traces"
    ):
        agreement(golden, [label(row_id, "PASS", 1)])


def test_the_audit_sample_command_reads_a_dataset_of_traces(tmp_path: Path) -> None:
    out = tmp_path / "sample.jsonl"
    args = ["audit-sample", str(REPORT), "--dataset", str(DATASET), "--rate", "0.5"]
    result = CliRunner().invoke(app, [*args, "--out", str(out)])
    assert result.exit_code == 0, result.output
    first, *lines = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    assert 'human.firstFailingStep with the index of the first step that failed, or "none"' in (
        first["instructions"])  # fmt: skip
    assert lines and all("steps" in line for line in lines)
    # filled in with the judge's own verdicts: full agreement on both
    for line in lines:
        step = line.get("firstFailingStep")
        line["human"] = {
            "diagnosis": line["diagnosis"],
            "firstFailingStep": step if step is not None else "none",
        }
    out.write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in [first, *lines]))
    result = CliRunner().invoke(app, ["agreement", str(REPORT), str(out)])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("agreement 100.0% on ")
    assert "; first failing step 100.0% on " in result.stdout
