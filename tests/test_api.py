"""The Python API: the guide's example runs as written; in-memory rows are checked like a file."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

import ragbatch
from ragbatch.core._errors import DatasetError

ROOT = Path(__file__).resolve().parent.parent


def test_the_guide_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    guide = (ROOT / "docs" / "guides" / "python-api.md").read_text(encoding="utf-8")
    block = re.search(r"<!-- api-example -->\s*```python\n(.*?)```", guide, re.S)
    assert block is not None
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        exec(compile(block.group(1), "python-api.md", "exec"), {})
    finally:
        os.chdir(cwd)
    accuracy, fallback = capsys.readouterr().out.split()
    assert 0 < float(accuracy) < 1 and 0 < float(fallback) < 1


def test_evaluate_matches_the_cli_report() -> None:
    import orjson

    rows = [
        orjson.loads(line)
        for line in (ROOT / "datasets/rag-fixture.jsonl").read_bytes().splitlines()
    ]
    report = ragbatch.evaluate(rows, pricing=ROOT / "pricing/typesafe-2026-12.json").report
    golden = orjson.loads((ROOT / "reports/expected-report.json").read_bytes())
    assert (
        report.model_dump(mode="json", by_alias=True, exclude_none=True)["modes"] == golden["modes"]
    )
    assert report.dataset.name == "<memory>"


def test_bad_rows_name_their_position() -> None:
    with pytest.raises(DatasetError) as caught:
        ragbatch.evaluate(
            [{"id": "a", "question": "q", "contexts": [], "answer": "x"}, {"id": "b"}]
        )
    assert str(caught.value) == "<memory>:2: missing field 'question'"


def test_file_options_take_plain_strings_and_the_row_limit_applies(tmp_path: Path) -> None:
    import orjson

    rows = [
        orjson.loads(line)
        for line in (ROOT / "datasets/rag-fixture.jsonl").read_bytes().splitlines()
    ]
    pricing = str(ROOT / "pricing/typesafe-2026-12.json")
    streamed = tmp_path / "rows.jsonl"
    result = ragbatch.evaluate(rows, pricing=pricing, rows_out=str(streamed), max_report_rows=5)
    assert result.report.rows == [] and result.report.rows_omitted is not None
    assert len(streamed.read_bytes().splitlines()) == 48
    # the rows the report left out are read back from rows_out, in input order
    assert [r.id for r in result.row_results()] == [r["id"] for r in rows]
    assert len(ragbatch.evaluate(rows, pricing=pricing, max_report_rows=None).report.rows) == 48
