"""ragbatch's Phoenix and Langfuse exports, checked against the real tools' own schemas.

tests/fixtures/real/make_fixtures.py (in the tools' venvs) sent these very records to a live
Phoenix 20.26.1 (raw REST POST and the client's dataframe helper, read back) and through the
Langfuse SDKs' request models (3.14.6 and 5.2.0); here the current export must still write
exactly those records, and they must match Phoenix's OpenAPI request schema.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from ragbatch.report._export import export_rows

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real"
sys.path.insert(0, str(REAL))
from make_fixtures import report_rows  # noqa: E402


def load(name: str) -> Any:
    return json.loads((REAL / name).read_text())


def test_phoenix_records_fit_the_rest_schema_and_were_kept_by_a_live_server() -> None:
    proof = load("phoenix-20.26.1-annotations-roundtrip.json")
    written = proof["written"]
    rows = report_rows([("unused", r["span_id"]) for r in written])
    made = export_rows(rows, "phoenix").records
    # the proof was recorded before records carried an identifier: the rest is as it was
    assert [{k: v for k, v in r.items() if k != "identifier"} for r in made] == written
    assert {r["identifier"] for r in made} == {"ragbatch-decision-1"}  # no decisionVersion
    excerpt = load("phoenix-20.26.1-openapi-span-annotations.json")
    schema = {**excerpt["requestBody"], "components": excerpt["components"]}
    jsonschema.validate({"data": made}, schema)  # POST /v1/span_annotations's body
    for record in written:  # the REST body reads result.*, the dataframe helper the columns
        assert record["result"] == {k: record[k] for k in ("label", "score", "explanation")}
    kept = {(a["name"], a["span_id"]): a["result"] for a in proof["read_back"]}
    for route in ("ragbatch", "ragbatch-dataframe"):
        assert [kept[(route, r["span_id"])] for r in written] == [r["result"] for r in written]


def test_the_rest_route_reads_each_row_s_verdict_from_the_export() -> None:
    # Phoenix's REST route reads only the fields its schema names (the flat label, score and
    # explanation are the dataframe helper's): what it reads of ragbatch's records must still
    # carry each row's verdict, on the row's root span
    excerpt = load("phoenix-20.26.1-openapi-span-annotations.json")
    read = set(excerpt["components"]["schemas"]["SpanAnnotationData"]["properties"])
    rows = report_rows([("t1", "00000000000000a1"), ("t2", "00000000000000b2")])
    records = export_rows(rows, "phoenix").records
    schema = {**excerpt["requestBody"], "components": excerpt["components"]}
    jsonschema.validate({"data": records}, schema)
    seen = [{k: v for k, v in record.items() if k in read} for record in records]
    assert [(r["span_id"], r["name"], r["annotator_kind"], r["result"]) for r in seen] == [
        ("00000000000000a1", "ragbatch", "LLM",
         {"label": "PASS", "score": 1.0, "explanation": "Jev: PASS (confidence 0.81, route auto)"}),
        ("00000000000000b2", "ragbatch", "LLM",
         {"label": "GENERATOR_UNGROUNDED", "score": 0.0,
          "explanation": "Jev: GENERATOR_UNGROUNDED (confidence 0.81, route auto)"}),
    ]  # fmt: skip
    assert [r["metadata"]["row_id"] for r in seen] == ["q1", "q2"]


@pytest.mark.parametrize("tag", ["3.14.6", "5.2.0"])
def test_langfuse_scores_pass_the_sdk_request_model_whole(tag: str) -> None:
    proof = load(f"langfuse-{tag}-scores-request.json")
    written = proof["written"]
    ids = [(r["traceId"], r["observationId"]) for r in written[::2]]
    assert export_rows(report_rows(ids), "langfuse").records == written
    assert proof["sdk_body"] == [{k: v for k, v in r.items() if v is not None} for r in written]
    assert all(r["comment"].endswith("(confidence 0.81, route auto)") for r in written)
