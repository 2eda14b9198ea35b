"""``ragbatch export``: Phoenix span annotations and Langfuse scores, checked field by field."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson
import pytest
from typer.testing import CliRunner

from ragbatch.cli._app import app
from ragbatch.report._export import export_rows, score_id

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "datasets" / "rag-fixture.jsonl"
PRICING = str(ROOT / "pricing" / "typesafe-2026-12.json")
# rag-001 was decided by the fallback judge, rag-002 by Jev (see the golden report)
TRACES = {"rag-001": "trace-1", "rag-002": "trace-2", "rag-004": "trace-4"}
SPANS = {"rag-001": {"root": "span-1r", "llm": "span-1l"}, "rag-002": {"llm": "span-2l"}}


def lines(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


@pytest.fixture
def report(tmp_path: Path) -> Path:
    """A real run on four fixture rows: three with trace ids, one (rag-004) failed (its mock
    block lacks an answer).

    Span ids are added to the report's and the rows file's rows as the trace-export readers
    write them.
    """
    rows = []
    for row in [orjson.loads(line) for line in FIXTURE.read_bytes().splitlines()][:4]:
        if row["id"] in TRACES:
            row["traceId"] = TRACES[row["id"]]
        if row["id"] == "rag-004":
            del row["mock"]["generation"]["relevance"]
        rows.append(row)
    dataset = tmp_path / "rows.jsonl"
    dataset.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    out = tmp_path / "report.json"
    rows_out = tmp_path / "rows-out.jsonl"
    args = ["run", str(dataset), "--out", str(out), "--pricing", PRICING, "--quiet"]
    result = CliRunner().invoke(app, [*args, "--rows-out", str(rows_out)])
    assert result.exit_code == 3, result.output  # rag-004 failed
    data = orjson.loads(out.read_bytes())
    for row in data["rows"]:
        if row["id"] in SPANS:
            row["spans"] = SPANS[row["id"]]
    out.write_bytes(orjson.dumps(data))
    streamed = [{**r, "spans": SPANS[r["id"]]} if r["id"] in SPANS else r for r in lines(rows_out)]
    rows_out.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in streamed))
    return out


def export(report: Path, format: str, out: Path, *extra: str) -> Any:
    return CliRunner().invoke(
        app, ["export", str(report), "--format", format, "--out", str(out), *extra]
    )


def test_phoenix_span_annotations_field_by_field(report: Path, tmp_path: Path) -> None:
    out = tmp_path / "phoenix.jsonl"
    result = export(report, "phoenix", out)
    assert result.exit_code == 0, result.output
    rows = {r["id"]: r for r in orjson.loads(report.read_bytes())["rows"]}
    first, second = lines(out)
    one, two = rows["rag-001"], rows["rag-002"]
    assert one["route"] == "fallback" and two["route"] == "auto"
    result_ = {
        "label": one["cascade"]["diagnosis"],
        "score": 1.0 if one["cascade"]["diagnosis"] == "PASS" else 0.0,
        "explanation": f"Jev: {one['diagnosis']} (confidence {round(one['confidence'], 2)}, "
        f"route fallback); the fallback judge decided {one['cascade']['diagnosis']} (confidence "
        f"{round(one['cascade']['confidence'], 2)})",
    }
    assert first == {
        "span_id": "span-1r",  # the root span, not the LLM span
        "name": "ragbatch",
        "annotator_kind": "LLM",
        **result_,
        "result": result_,  # where the REST endpoint reads them
        "metadata": {
            "row_id": "rag-001",
            "route": "fallback",
            "judge": "baseline",
            "jev_diagnosis": one["diagnosis"],
            "jev_confidence": one["confidence"],
            "model": one["model"],
            "decision": one["decisionId"],
            "retrieval": one["retrieval"],
            "generation": one["generation"],
            "confidence": one["cascade"]["confidence"],
        },
        # Phoenix keeps one annotation per (name, span, identifier): an upload sent again
        # replaces itself
        "identifier": f"ragbatch-decision-{one['decisionVersion']}",
    }
    assert one["decisionVersion"] == "1.0.0"
    assert first["label"] == "PASS" and first["score"] == 1.0
    assert second["span_id"] == "span-2l"  # no root span: the LLM span
    assert second["label"] == two["diagnosis"] == two["cascade"]["diagnosis"]
    assert second["score"] == (1.0 if two["diagnosis"] == "PASS" else 0.0)
    assert second["explanation"] == (
        f"Jev: {two['diagnosis']} (confidence {round(two['confidence'], 2)}, route auto)"
    )
    assert second["metadata"]["judge"] == "jev"
    assert second["metadata"]["confidence"] == two["confidence"]
    assert result.stderr == (
        "warning: skipped 2 rows: rag-003 (no span id (root or LLM span) on the row), "
        "rag-004 (no span id (root or LLM span) on the row)\n"
    )
    assert result.stdout == f"wrote 2 phoenix span annotations for 2 rows to {out}\n"


def test_langfuse_scores_field_by_field(report: Path, tmp_path: Path) -> None:
    out = tmp_path / "langfuse.jsonl"
    result = export(report, "langfuse", out, "--name", "rag")
    assert result.exit_code == 0, result.output
    rows = {r["id"]: r for r in orjson.loads(report.read_bytes())["rows"]}
    scores = lines(out)
    assert len(scores) == 4
    for (category, boolean), key in zip(
        (scores[0:2], scores[2:4]), ("rag-001", "rag-002"), strict=True
    ):
        row = rows[key]
        label = row["cascade"]["diagnosis"]
        root = SPANS[key].get("root")
        assert category == {
            "id": score_id(TRACES[key], root, "rag.diagnosis"),
            "traceId": TRACES[key],
            "observationId": root,  # the root observation when known, else the trace
            "name": "rag.diagnosis",
            "value": label,
            "dataType": "CATEGORICAL",
            "comment": category["comment"],
        }
        assert boolean == {
            "id": score_id(TRACES[key], root, "rag.pass"),
            "traceId": TRACES[key],
            "observationId": root,
            "name": "rag.pass",
            "value": 1 if label == "PASS" else 0,
            "dataType": "BOOLEAN",
            "comment": category["comment"],
        }
        assert category["comment"].startswith(f"Jev: {row['diagnosis']} (confidence ")
    assert scores[0]["observationId"] == "span-1r" and scores[2]["observationId"] is None
    assert len({s["id"] for s in scores}) == 4  # one id per (trace, observation, name)
    again = tmp_path / "again.jsonl"
    assert export(report, "langfuse", again, "--name", "rag").exit_code == 0
    assert [s["id"] for s in lines(again)] == [s["id"] for s in scores]  # re-upload: update
    assert result.stderr == (
        "warning: skipped 2 rows: rag-003 (no traceId on the row), "
        "rag-004 (no verdict (the row failed))\n"
    )


def test_the_rows_out_file_exports_like_the_report(report: Path, tmp_path: Path) -> None:
    rows_out = tmp_path / "rows-out.jsonl"
    from_rows = tmp_path / "a.jsonl"
    from_report = tmp_path / "b.jsonl"
    assert export(rows_out, "langfuse", from_rows).exit_code == 0
    assert export(report, "langfuse", from_report).exit_code == 0
    assert from_rows.read_bytes() == from_report.read_bytes()


def test_nothing_to_export_and_bad_input_are_errors(report: Path, tmp_path: Path) -> None:
    golden = ROOT / "reports" / "expected-report.json"
    result = export(golden, "phoenix", tmp_path / "x.jsonl")
    assert result.exit_code == 2
    assert result.stderr == (
        f"error: {golden}: none of the 48 rows can be exported to phoenix (no span id (root "
        "or LLM span) on the row); trace and span ids come from rows read with --format "
        "openinference or --format langfuse\n"
    )
    assert not (tmp_path / "x.jsonl").exists()
    result = export(report, "otel", tmp_path / "x.jsonl")
    assert (result.exit_code, result.stderr) == (
        2,
        "error: unknown export format 'otel'; choose from phoenix, langfuse\n",
    )
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a"}\n[1]\n')
    result = export(bad, "langfuse", tmp_path / "x.jsonl")
    assert (result.exit_code, result.stderr) == (
        2,
        f"error: {bad}:2: expected a row result (an object with id)\n",
    )


def test_export_is_pure_and_keeps_input_order() -> None:
    ok = {"status": "ok", "cascade": {"status": "ok", "diagnosis": "PASS", "confidence": 0.9}}
    rows = [{"id": f"r{i}", "traceId": f"t{i}", **ok} for i in (3, 1, 2)]
    done = export_rows(rows, "langfuse")
    assert [s["traceId"] for s in done.records] == ["t3", "t3", "t1", "t1", "t2", "t2"]
    assert done.skipped == []


def test_a_failed_fallback_leaves_jevs_own_diagnosis() -> None:
    row = {
        "id": "t",
        "traceId": "trace",
        "spans": {"root": "root-span"},
        "status": "ok",
        "diagnosis": "JUDGE_UNCERTAIN",
        "confidence": 0.5,
        "route": "fallback",
        "cascade": {"status": "failed", "error": {"kind": "no-baseline", "message": "m"}},
    }
    (annotation,) = export_rows([row], "phoenix").records
    assert annotation["label"] == "JUDGE_UNCERTAIN" and annotation["score"] == 0.0
    assert annotation["explanation"] == (
        "Jev: JUDGE_UNCERTAIN (confidence 0.5, route fallback); the fallback judge gave no "
        "verdict (no-baseline)"
    )
    assert annotation["metadata"] == {
        "row_id": "t",
        "route": "fallback",
        "judge": "jev",
        "jev_diagnosis": "JUDGE_UNCERTAIN",
        "jev_confidence": 0.5,
        "fallback_error": "no-baseline",
        "confidence": 0.5,
    }
    failed = {**row, "status": "failed", "diagnosis": None, "confidence": None}
    assert export_rows([failed], "langfuse").skipped == [("t", "no verdict (the row failed)")]


def test_comment_numbers_are_rounded_and_ids_are_stable() -> None:
    row = {"id": "r", "status": "ok", "diagnosis": "PASS", "confidence": 0.8089999999999999,
           "route": "auto", "traceId": "t1", "spans": {"root": "s1"},
           "cascade": {"status": "ok", "diagnosis": "PASS", "confidence": 0.8089999999999999,
                       "source": "jev"}}  # fmt: skip
    diagnosis, passed = export_rows([row], "langfuse").records
    assert diagnosis["comment"] == "Jev: PASS (confidence 0.81, route auto)"
    assert diagnosis["id"] == score_id("t1", "s1", "ragbatch.diagnosis")
    assert diagnosis["id"] != passed["id"] != score_id("t2", "s1", "ragbatch.pass")
    assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
                        diagnosis["id"])  # fmt: skip
    (annotation,) = export_rows([row], "phoenix").records
    assert annotation["explanation"] == "Jev: PASS (confidence 0.81, route auto)"
    assert annotation["metadata"]["confidence"] == 0.8089999999999999  # data keeps every digit
