"""Every command takes the run options it shares from the one option list: the commands that
read a dataset take its whole source group (``--format``, ``--mapping``, ``--outputs``, ...)
declared as ``run`` declares them, and the help names every value the code accepts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
import typer
from typer.testing import CliRunner

from ragbatch.cli._app import app
from ragbatch.core import EXTRACTORS
from ragbatch.run._options import CLAIM_EXTRACTORS, cli_fields, spec_of

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "datasets" / "samples"
SOURCE = ["dataset", "format", "mapping", "outputs", "ignore_unknown_fields"]
COMMANDS = typer.main.get_command(app).commands  # type: ignore[attr-defined]


def params(command: str) -> dict[str, Any]:
    return {p.name: p for p in COMMANDS[command].params}


def declaration(param: Any) -> tuple[Any, ...]:
    return (param.opts, param.secondary_opts, param.help, param.envvar,
            getattr(param, "min", None), getattr(param, "max", None))  # fmt: skip


RUN = params("run")


@pytest.mark.parametrize("command", ["estimate", "counterfactual", "audit-sample", "infer"])
def test_a_command_that_reads_a_dataset_takes_runs_source_options(command: str) -> None:
    own = params(command)
    assert set(SOURCE) <= set(own)
    for name in SOURCE[1:]:  # DATASET is an option (--dataset) where a report is the argument
        assert declaration(own[name]) == declaration(RUN[name]), name
        assert own[name].default == RUN[name].default, name
    assert own["dataset"].help == RUN["dataset"].help


def test_estimate_declares_no_run_option_by_hand() -> None:
    own = params("estimate")
    shared = set(own) - {"json_out"}
    assert shared <= set(RUN)
    for name in shared:
        assert declaration(own[name]) == declaration(RUN[name]), name
    # the one default of its own: an estimate prices the live service, the mock costs nothing
    assert {n for n in shared if own[n].default != RUN[n].default} == {"provider"}
    assert own["provider"].default == "jev"


def test_every_value_the_code_accepts_is_named_in_the_help() -> None:
    assert (*EXTRACTORS, "llm") == CLAIM_EXTRACTORS
    chosen = [f for f in cli_fields() if spec_of(f).choices]
    assert {f.name for f in chosen} >= {"claim_extractor", "provider", "baseline", "routing"}
    for f in chosen:
        for value in spec_of(f).choices:
            assert f"'{value}'" in spec_of(f).help, (f.name, value)
    for command in ("run", "estimate"):
        text = " ".join(CliRunner().invoke(app, [command, "--help"]).stdout.split())
        assert "or 'llm' (an OpenAI-compatible model" in text, command


def test_estimate_reads_other_formats(tmp_path: Path) -> None:
    ragas = ["estimate", str(SAMPLES / "ragas-sample.jsonl"), "--format", "ragas", "--json"]
    result = CliRunner().invoke(app, [*ragas, "--cache-dir", str(tmp_path / "none")])
    assert result.exit_code == 0, result.stderr
    assert orjson.loads(result.stdout)["rows"] == 5
    golden = ["estimate", str(SAMPLES / "golden_set.yaml"), "--format", "golden-yaml",
              "--outputs", str(SAMPLES / "golden-outputs.jsonl"), "--json"]  # fmt: skip
    result = CliRunner().invoke(app, [*golden, "--cache-dir", str(tmp_path / "none")])
    assert result.exit_code == 0, result.stderr
    assert orjson.loads(result.stdout)["rows"] == 6


def test_counterfactual_reads_other_formats(tmp_path: Path) -> None:
    out = tmp_path / "cf.jsonl"
    args = ["counterfactual", str(SAMPLES / "ragas-sample.jsonl"), "--format", "ragas"]
    result = CliRunner().invoke(app, [*args, "--out", str(out)])
    assert result.exit_code == 0, result.stderr
    written = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    assert written and all(r["golden"]["counterfactualOf"] for r in written)
    assert result.stdout.startswith(f"wrote {len(written)} counterfactual rows to {out} (5 read;")
