"""``ragbatch.evaluate(data, **options)``: the CLI's options by name, every kind of data, and
the per-row DataFrame back (live Jev on the loopback server, committed samples)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import anyio
import orjson
import pandas
import pytest
import typer.main
from typer.testing import CliRunner

import ragbatch
from datasets import Dataset  # type: ignore[attr-defined]  # mypy sees the repo's datasets/ folder
from ragbatch._api import API_OPTIONS, COLUMNS, api_options
from ragbatch.cli._app import app
from ragbatch.core._errors import ConfigError, DatasetError
from ragbatch.report._models import RowResult
from ragbatch.run._options import DEFAULTS, ENVIRONMENT, GROUP_OF, OPTION_NAMES
from ragbatch.run._preflight import check_options as check_run
from ragbatch.testing import JevServer
from ragbatch.testing.jev_server import Fault

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "datasets" / "rag-fixture.jsonl"
RAGAS = ROOT / "datasets" / "samples" / "ragas-sample.jsonl"
KEY = "test-key"
STRICT = ["--fail-threshold", "0.1", "--routing", "guarded", "--concurrency", "2"]


def run_params() -> dict[str, Any]:
    command = typer.main.get_command(app).commands["run"]  # type: ignore[attr-defined]
    return {p.name: p for p in command.params}


def fixture_rows() -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in FIXTURE.read_bytes().splitlines()]


def live(server: JevServer, tmp_path: Path, **options: Any) -> dict[str, Any]:
    return {
        "provider": "jev",
        "base_url": server.base_url,
        "api_key": KEY,
        "model": "jev-1.13.0",
        "cache_dir": tmp_path / "cache",
        **options,
    }


def without_latency(rows: list[RowResult]) -> list[RowResult]:
    return [row.model_copy(update={"latency_ms": 0.0}) for row in rows]


# -- the options are the CLI's --------------------------------------------------------------


def test_the_options_are_the_run_commands_parameters_with_its_defaults() -> None:
    params = run_params()
    assert list(params) == list(OPTION_NAMES)
    assert {name: p.default for name, p in params.items()} == DEFAULTS
    assert {n: p.envvar for n, p in params.items() if p.envvar} == ENVIRONMENT
    assert set(API_OPTIONS) == set(OPTION_NAMES) - {"dataset"}


@pytest.mark.parametrize("name", sorted(set(OPTION_NAMES) - {"dataset"}))
def test_every_cli_option_is_accepted_by_name(name: str) -> None:
    default = DEFAULTS[name]
    options = api_options({name: default})
    assert getattr(getattr(options, GROUP_OF[name]), name) == default
    check_run(options)  # and the run accepts it


def test_an_unknown_option_is_a_clear_error_listing_the_valid_ones() -> None:
    with pytest.raises(ConfigError) as caught:
        ragbatch.evaluate(fixture_rows(), fail_treshold=0.1, thresholds=None)
    message = str(caught.value)
    assert message.startswith("unknown option(s) fail_treshold, thresholds; valid options")
    for name in ("fail_threshold", "provider", "base_url", "model", "cache_dir", "routing"):
        assert name in message
    with pytest.raises(ConfigError, match="first argument"):
        ragbatch.evaluate(fixture_rows(), dataset="x.jsonl")


def test_the_issues_call_works_and_options_take_effect(tmp_path: Path) -> None:
    rows = fixture_rows()
    strict = ragbatch.evaluate(rows, fail_threshold=0.1, routing="guarded", concurrency=2)
    default = ragbatch.evaluate(rows)
    assert strict.report.policy.fail_threshold == 0.1
    assert strict.report.policy.routing == "guarded"
    assert default.report.policy.fail_threshold == 0.2
    assert strict.report.modes.jev_only != default.report.modes.jev_only
    # the same as the CLI with the same options
    out = tmp_path / "cli.json"
    cli = CliRunner().invoke(
        app,
        ["run", str(FIXTURE), "--out", str(out), "--quiet", *STRICT],
    )
    assert cli.exit_code == 0, cli.output
    cli_modes = orjson.loads(out.read_bytes())["modes"]
    dumped = strict.report.model_dump(mode="json", by_alias=True, exclude_none=True)
    assert dumped["modes"] == cli_modes


def test_options_read_the_clis_environment_variables(
    jev_server: JevServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TYPESAFE_API_KEY", KEY)
    monkeypatch.setenv("TYPESAFE_BASE_URL", jev_server.base_url)
    with pytest.warns(ragbatch.RagbatchWarning, match="model 'jev-latest' is an alias"):
        result = ragbatch.evaluate(RAGAS, format="ragas", provider="jev", cache_dir=tmp_path / "c")
    assert result.report.modes.jev_only.failures.count == 0
    assert jev_server.successful == 5
    assert len(result.warnings) == 1 and "jev-latest" in result.warnings[0]


# -- every kind of data -------------------------------------------------------------------------


def test_a_dataframe_with_ragbatch_columns_equals_the_list_of_dicts() -> None:
    rows = fixture_rows()
    frame = pandas.DataFrame(rows)  # optional columns become NaN where absent: read as absent
    from_frame = ragbatch.evaluate(frame).report
    from_list = ragbatch.evaluate(rows).report
    assert from_frame.modes == from_list.modes
    assert from_frame.rows == from_list.rows
    assert from_frame.dataset.name == "<DataFrame>" and from_frame.dataset.rows == 48


def test_ragas_columns_from_a_dataframe_a_hf_dataset_a_list_and_a_path(
    jev_server: JevServer, tmp_path: Path
) -> None:
    records = [orjson.loads(line) for line in RAGAS.read_bytes().splitlines()]
    options = live(jev_server, tmp_path)
    by_path = ragbatch.evaluate(RAGAS, format="ragas", **options).report
    frame = ragbatch.evaluate(pandas.DataFrame(records), **options).report
    # from_list would take its columns from the first record only (the last one has an id)
    dataset = Dataset.from_pandas(pandas.DataFrame(records))
    hf = ragbatch.evaluate(dataset, **options).report
    listed = ragbatch.evaluate(records, **options).report
    assert by_path.dataset.name == "ragas-sample.jsonl"
    assert (frame.dataset.name, hf.dataset.name, listed.dataset.name) == (
        "<DataFrame>",
        "<Dataset>",
        "<memory>",
    )
    for other in (frame, hf, listed):
        assert other.modes == by_path.modes
        assert without_latency(other.rows) == without_latency(by_path.rows)
    assert [r.id for r in by_path.rows] == [*(f"row-{n}" for n in range(1, 5)), "ragas-5"]
    assert by_path.modes.jev_only.failures.count == 0


def test_a_bad_dataframe_row_names_the_frame_and_the_row() -> None:
    frame = pandas.DataFrame(
        [
            {"user_input": "q1", "retrieved_contexts": ["c"], "response": "a"},
            {"user_input": "q2", "retrieved_contexts": "not a list", "response": "a"},
        ]
    )
    with pytest.raises(DatasetError) as caught:
        ragbatch.evaluate(frame)
    assert str(caught.value).startswith("<DataFrame>:2: column 'retrieved_contexts'")
    with pytest.raises(ConfigError, match="format 'csv' is read from files: pass its path"):
        ragbatch.evaluate(frame, format="csv")


def test_workers_need_a_path_and_views_are_written(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="workers > 1 needs the data as a file path"):
        ragbatch.evaluate(fixture_rows(), workers=2)
    with pytest.raises(ConfigError, match=r"workers > 1 needs ragbatch.evaluate\(\)"):
        anyio.run(lambda: ragbatch.evaluate_async(FIXTURE, workers=2))
    in_processes = ragbatch.evaluate(FIXTURE, workers=2)
    assert in_processes.report == ragbatch.evaluate(str(FIXTURE)).report
    result = ragbatch.evaluate(
        fixture_rows(), markdown=str(tmp_path / "r.md"), out=str(tmp_path / "r.json")
    )
    assert (tmp_path / "r.md").read_text().startswith("#")
    written = orjson.loads((tmp_path / "r.json").read_bytes())
    assert (
        written["modes"]
        == result.report.model_dump(mode="json", by_alias=True, exclude_none=True)["modes"]
    )


# -- results back as a DataFrame ---------------------------------------------------------------


def test_to_pandas_has_one_row_per_input_row_with_every_judgment(
    start_jev_server: Any, tmp_path: Path
) -> None:
    rows = fixture_rows()[:6]
    failing = rows[2]["question"]

    def fail_third_row(index: int, body: dict[str, Any]) -> Fault | None:
        # 422 is not retried: the row fails for good and is data, not a crash
        return Fault(kind="status", status=422) if failing in orjson.dumps(body).decode() else None

    server = start_jev_server(fault_fn=fail_third_row)
    result = ragbatch.evaluate(rows, **live(server, tmp_path))
    table = result.to_pandas()
    assert list(table.columns) == COLUMNS
    assert list(table["id"]) == [r["id"] for r in rows]
    records = table.astype(object).where(table.notna(), None).to_dict(orient="records")
    for record, row in zip(records, result.report.rows, strict=True):
        assert record["diagnosis"] == row.diagnosis
        assert record["confidence"] == row.confidence
        assert record["route"] == row.route
        assert record["status"] == row.status
        assert record["trace_id"] == row.trace_id
        assert record["cascade_diagnosis"] == row.cascade.diagnosis
        if row.status == "failed":
            assert row.error is not None and record["error_kind"] == row.error.kind == "http-422"
            assert record["diagnosis"] is None and record["retrieval_sufficiency"] is None
            continue
        assert record["error_kind"] is None
        assert row.retrieval is not None and row.generation is not None
        assert record["retrieval_sufficiency"] == row.retrieval.sufficiency
        assert record["retrieval_conflict"] == row.retrieval.conflict
        assert record["retrieval_chunk_relevance"] == row.retrieval.chunk_relevance
        assert record["generation_relevance"] == row.generation.relevance
        assert record["generation_groundedness"] == row.generation.groundedness
        assert record["generation_contradiction"] == row.generation.contradiction
    assert list(table["status"]) == ["ok", "ok", "failed", "ok", "ok", "ok"]


def test_the_guide_dataframe_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    guide = (ROOT / "docs" / "guides" / "python-api.md").read_text(encoding="utf-8")
    block = re.search(r"<!-- dataframe-example -->\s*```python\n(.*?)```", guide, re.S)
    assert block is not None
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        exec(compile(block.group(1), "python-api.md", "exec"), {})
    finally:
        os.chdir(cwd)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["id", "diagnosis", "route", "generation_groundedness"]
    assert lines[1].split()[:3] == ["0", "rag-001", "JUDGE_UNCERTAIN"]
    assert len(lines) == 6
