"""A newcomer's first commands: what the CLI says when the obvious thing is tried."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragbatch import __version__
from ragbatch.cli._app import app
from ragbatch.data._formats import open_dataset

ROOT = Path(__file__).resolve().parent.parent
IMPORTING = (ROOT / "docs" / "guides" / "importing-data.md").read_text()
REAL = ROOT / "tests" / "fixtures" / "real"
SAMPLES = ROOT / "datasets" / "samples"


@pytest.mark.parametrize(
    ("path", "hint"),
    [
        (REAL / "ragas-0.4.3-to-jsonl.jsonl", "looks like a ragas export: add --format ragas"),
        (SAMPLES / "ragas-sample.jsonl", "looks like a ragas export: add --format ragas"),
        (REAL / "deepeval-4.3.1-save-as-jsonl.jsonl",
         "looks like a deepeval export: add --format deepeval"),
        (REAL / "phoenix-20.26.1-spans.jsonl",
         "looks like a Phoenix spans export: add --format openinference"),
        (REAL / "langfuse-5.2.0-observations-v2.jsonl",
         "looks like a Langfuse export: add --format langfuse"),
        (REAL / "langfuse-3.14.6-trace-get.jsonl",
         "looks like a Langfuse export: add --format langfuse"),
    ],
)  # fmt: skip
def test_another_tools_export_as_jsonl_names_the_format(path: Path, hint: str) -> None:
    result = CliRunner().invoke(app, ["run", str(path), "--out", "/dev/null"])
    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: {path}:1: ")
    assert result.stderr.endswith(f": {hint}\n")


def test_version_and_short_help() -> None:
    result = CliRunner().invoke(app, ["--version"])
    assert (result.exit_code, result.stdout) == (0, f"ragbatch {__version__}\n")
    for args in (["-h"], ["run", "-h"]):
        short, long = CliRunner().invoke(app, args), CliRunner().invoke(app, [*args[:-1], "--help"])
        assert short.exit_code == 0 and short.stdout == long.stdout and "Usage:" in short.stdout


def test_without_dataset_elsewhere_the_default_path_is_named(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ragbatch", "run", "--out", str(tmp_path / "r.json")],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr == (
        "error: datasets/rag-fixture.jsonl: cannot read dataset: No such file or directory (the "
        f"default dataset, looked for in {tmp_path}; pass your dataset's path: ragbatch run "
        "DATASET)\n"
    )


def test_the_guide_csv_example_reads_the_bundled_sample() -> None:
    found = re.search(
        r"ragbatch run (datasets/samples/mapped-sample\.csv [^\n]*\\\n[^\n]*)", IMPORTING
    )
    assert found is not None
    args = shlex.split(found[1].replace("\\\n", " "))
    mapping = args[args.index("--mapping") + 1]
    rows = list(open_dataset(ROOT / args[0], "csv", mapping=mapping))
    assert [(r.id, r.trace_id, r.metadata) for r in rows][:2] == [
        ("q-101", "tr-9f1", {"topic": "account"}),
        ("q-102", "tr-9f2", {"topic": "reports"}),
    ]
    assert rows[0].question == "How do I reset my password?"
    assert [c.id for c in rows[0].contexts] == ["kb-12", "kb-40"]


def test_run_help_points_only_at_doc_pages_that_exist() -> None:
    boxed = CliRunner().invoke(app, ["run", "--help"]).stdout
    text = " ".join(re.sub(r"[│╭╮╰╯─]", " ", boxed).split())  # rich's boxes, wrapped lines
    assert "README" not in text
    pointers = re.findall(r"\bdocs/[\w/-]+\.md\b", text)
    assert pointers, text[:200]
    assert [p for p in pointers if not (ROOT / p).is_file()] == []
