"""What the terminal says after a run, and the one-line errors and warnings around options."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from ragbatch.cli.app import app

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "datasets/rag-fixture.jsonl"


def run(args: list[str]) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, args)
    return result.exit_code, result.stdout, result.stderr


def test_failed_rows_are_summarised_by_kind_with_what_to_do(tmp_path: Path) -> None:
    sample = ROOT / "datasets/samples/ragas-sample.jsonl"
    out = tmp_path / "r.json"
    code, stdout, _ = run(["run", str(sample), "--format", "ragas", "--out", str(out)])
    assert code == 3
    lines = stdout.splitlines()
    start = lines.index("  Jev failures by kind:")
    assert lines[start : start + 6] == [
        "  Jev failures by kind:",
        "    mock-missing-answer: 5 rows; first row-1: mock block of row 'row-1' has no answer "
        "for question 'chunkRelevance:0'",
        "      what to do: these rows have no mock answers; use --provider jev (the live Jev API, "
        "through the cache) or add a `mock` block to each row",
        "  baseline failures by kind:",
        "    no-baseline: 5 rows; first row-1: row 'row-1' has no baseline verdict",
        "      what to do: these rows record no baseline verdict; use --baseline lexical "
        "(offline) or --baseline llm",
    ]


def test_a_clean_run_prints_no_failure_section(tmp_path: Path) -> None:
    code, stdout, _ = run(["run", "--out", str(tmp_path / "r.json")])
    assert code == 0
    assert "failures by kind" not in stdout
