"""What a newcomer meets first: flags given a value, ``--help`` on an 80-column terminal, and
every bundled sample run as it is, under the default (mock) provider."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragbatch.cli._app import app
from ragbatch.providers import OVERLAP_MODEL

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "datasets" / "samples"
MAPPING = (
    "id=query_id,question=query,answer=llm_answer,contexts=retrieved,"
    "referenceAnswer=gold_answer,traceId=trace,metadata.topic=topic"
)
RAGAS, DEEPEVAL = ["--format", "ragas"], ["--format", "deepeval"]
OPENINFERENCE, LANGFUSE = ["--format", "openinference"], ["--format", "langfuse"]
# Each bundled sample with the options it is read with (README: Importing data).
HOW = {
    "authority-sample.jsonl": [],
    "ragas-sample.jsonl": RAGAS,
    "ragas-sample.csv": RAGAS,
    "ragas-list.json": RAGAS,
    "ragas-v01.json": RAGAS,
    "deepeval-sample.json": DEEPEVAL,
    "deepeval-sample.csv": DEEPEVAL,
    "openinference-otlp.json": OPENINFERENCE,
    "phoenix-spans.jsonl": OPENINFERENCE,
    "langfuse-export.json": LANGFUSE,
    "langfuse-observations.jsonl": LANGFUSE,
    "golden_set.yaml": ["--format", "golden-yaml", "--outputs", str(SAMPLES / "golden-outputs.jsonl")],
    "mapped-sample.csv": ["--format", "csv", "--mapping", MAPPING],
}  # fmt: skip
STAND_IN = (
    f"warning: rows without a mock block were answered by word overlap (model {OVERLAP_MODEL}): "
    "a stand-in that runs offline, not Jev's judgment; judge them with --provider jev\n"
)


def run(args: list[str], **env: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, args, env=env or None)
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "--quiet", "true"], "--quiet is a flag and takes no value: write --quiet alone, "
         "not --quiet true (see ragbatch run --help)"),
        (["run", "--quiet", "False"], "--quiet is a flag and takes no value: leave --quiet out "
         "for False, not --quiet False (see ragbatch run --help)"),
        (["run", "--adaptive", "no"], "--adaptive is a flag and takes no value: write "
         "--no-adaptive for no, not --adaptive no (see ragbatch run --help)"),
        (["estimate", "--json", "1"], "--json is a flag and takes no value: write --json alone, "
         "not --json 1 (see ragbatch estimate --help)"),
        (["cache", "verify", "--repair", "yes"], "--repair is a flag and takes no value: write "
         "--repair alone, not --repair yes (see ragbatch cache verify --help)"),
    ],
)  # fmt: skip
def test_a_flag_given_a_value_is_named(args: list[str], message: str, tmp_path: Path) -> None:
    assert run(args) == (2, "", f"error: {message}\n")


def test_a_flag_before_an_argument_still_works(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    code, stdout, stderr = run(["run", "--quiet", str(ROOT / "datasets/rag-fixture.jsonl"),
                                "--out", str(out)])  # fmt: skip
    assert (code, stdout, stderr) == (0, "", "")
    assert out.exists()


def test_run_help_at_80_columns_keeps_descriptions_and_defaults_whole() -> None:
    code, stdout, _ = run(["run", "--help"], COLUMNS="80")
    assert code == 0
    lines = stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert "<bool>" not in stdout and "…" not in stdout
    assert "  --quiet                         Print nothing but errors." in lines
    # every description starts at column 34 and has the 46 columns right of it
    options = lines[lines.index("Options:") + 1 :]
    continued = [line for line in options if not line.lstrip().startswith("-")]
    assert continued
    assert {len(line) - len(line.lstrip()) for line in continued} == {34}
    text = re.sub(r"(\w-) (\w)", r"\1\2", " ".join(stdout.split()))  # wrapped at a hyphen
    for shown in (
        "[default: reports/report.json]",
        "[default: datasets/rag-fixture.jsonl]",
        "[env var: TYPESAFE_BASE_URL; default: https://api.typesafe.ai]",
        "[default: (bundled typesafe-2026-12.json)]",
        "[default: 16777216; x>=1]",
        "[env var: TYPESAFE_API_KEY]",
    ):
        assert shown in text, shown


def test_every_bundled_sample_has_its_options_here() -> None:
    files = {p.name for p in SAMPLES.iterdir() if p.is_file()}
    assert files - set(HOW) == {"golden-outputs.jsonl"}  # golden_set.yaml's --outputs


@pytest.mark.parametrize("name", sorted(HOW))
def test_every_bundled_sample_runs_green_under_the_default_provider(
    name: str, tmp_path: Path
) -> None:
    out = tmp_path / "r.json"
    code, stdout, stderr = run(["run", str(SAMPLES / name), *HOW[name], "--out", str(out)])
    assert code == 0, stderr
    assert "(0/0)" not in stdout and "failures by kind" not in stdout.split("baseline failures")[0]
    assert "  jev-only   " in stdout
    has_mock = name in ("authority-sample.jsonl", "golden_set.yaml")
    assert (STAND_IN in stderr) is not has_mock


def test_a_run_without_labels_says_so(tmp_path: Path) -> None:
    args = ["run", str(SAMPLES / "ragas-sample.jsonl"), *RAGAS, "--out", str(tmp_path / "r.json")]
    code, stdout, _ = run(args)
    assert code == 0
    lines = stdout.splitlines()
    assert lines[1].startswith("  jev-only   no labelled rows to score, failures 0, latency ")
    assert lines[2].startswith("  baseline   no labelled rows to score, failures 5, ")
    code, _, stderr = run([*args, "--quiet"])
    assert (code, stderr) == (0, STAND_IN)
