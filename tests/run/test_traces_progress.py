"""The progress display counts to the conversations a file holds: to its lines when it holds
one a line, to nothing shown when its lines are not its rows (a JSON array, however it is
laid out)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragbatch.cli._app import app

ROOT = Path(__file__).resolve().parents[2]
CONVERSATIONS = ROOT / "tests/fixtures/real/traces/conversations"
PRICING = str(ROOT / "pricing/typesafe-2026-12.json")


@pytest.mark.parametrize(
    ("name", "format", "last"),
    [
        ("ragas-0.4.3-to-jsonl.jsonl", "ragas", "7/7 rows"),
        ("deepeval-4.3.1-save-as-jsonl.jsonl", "deepeval", "4/4 rows"),
        ("ragas-0.4.3-to-list.json", "ragas", "7 rows"),  # one line
        ("deepeval-4.3.1-save-as-json.json", "deepeval", "4 rows"),  # 265 lines
    ],
)
def test_the_progress_total_is_the_conversations_or_none(
    tmp_path: Path, name: str, format: str, last: str
) -> None:
    args = ["run", str(CONVERSATIONS / name), "--format", format, "--pricing", PRICING]
    out = ["--out", str(tmp_path / "r.json"), "--progress-interval", "0"]
    result = CliRunner().invoke(app, [*args, *out])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stderr.splitlines() if line.startswith("progress: ")]
    assert lines[-1].startswith(f"progress: {last}, "), lines
