"""What the terminal says after a run, and the one-line errors and warnings around options."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

from ragbatch.cli.app import app
from ragbatch.run import workers as worker_processes
from ragbatch.run.job import JobConfig
from ragbatch.run.shards import shard_of

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


def test_offline_misses_are_counted_and_the_recorded_model_is_named(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    shutil.copytree(ROOT / "cache", cache)  # opening a diskcache may touch its SQLite files
    record = tmp_path / "record.json"
    args = ["run", "--provider", "jev", "--offline", "--cache-dir", str(cache)]
    code, stdout, stderr = run(
        [*args, "--out", str(tmp_path / "r.json"), "--run-record", str(record)]
    )
    assert code == 3
    assert (
        "warning: --offline: every lookup missed the cache (48 misses); it holds replies recorded "
        "for jev-1.13.0, not for jev-latest: pass --model jev-1.13.0 to replay them\n"
    ) in stderr
    assert ", cache 0 hits / 48 misses\n" in stdout
    assert (
        "      what to do: the cache holds replies recorded for jev-1.13.0, not for jev-latest: "
        "pass --model jev-1.13.0 to replay them, or run without --offline to record these\n"
    ) in stdout
    facts = orjson.loads(record.read_bytes())
    assert (facts["cache"]["hits"], facts["cache"]["misses"]) == (0, 48)
    assert facts["cache"]["recordedModels"] == ["jev-1.13.0"]
    assert facts["failuresByKind"]["jev"]["cache-miss"]["rows"] == 48
    # the right model replays every row: nothing to say
    code, stdout, stderr = run([*args, "--model", "jev-1.13.0", "--out", str(tmp_path / "s.json")])
    assert code == 0
    assert "--offline: every lookup missed" not in stderr
    assert ", cache 48 hits / 0 misses" in stdout


def test_shard_progress_counts_the_shards_own_rows(tmp_path: Path) -> None:
    ids = [orjson.loads(line)["id"] for line in FIXTURE.read_bytes().splitlines() if line.strip()]
    mine = sum(shard_of(row_id, 3) == 1 for row_id in ids)
    assert 0 < mine < len(ids) == 48
    args = ["run", "--shard", "1/3", "--partial-out", str(tmp_path / "p.jsonl")]
    code, _, stderr = run([*args, "--out", str(tmp_path / "r.json")])
    assert code == 0
    last = stderr.splitlines()[-1]
    assert last.startswith(f"progress (shard 1/3): {mine}/{mine} rows, ")


def test_workers_are_capped_at_the_cores_with_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(worker_processes, "available_cores", lambda: 1)
    out = tmp_path / "r.json"
    code, _, stderr = run(["run", "--workers", "100", "--out", str(out), "--quiet"])
    assert code == 0
    assert stderr == (
        "warning: --workers 100 capped at 1 (48 rows, 1 core): more processes than rows or "
        "cores only add start-up time\n"
    )
    assert out.read_bytes() == (ROOT / "reports/expected-report.json").read_bytes()


def test_workers_are_capped_at_the_row_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(worker_processes, "available_cores", lambda: 16)
    small = tmp_path / "three.jsonl"
    small.write_bytes(b"".join(FIXTURE.read_bytes().splitlines(keepends=True)[:3]))
    config = JobConfig(dataset=small)
    heard: list[str] = []
    assert worker_processes.cap_workers(config, 8, heard.append) == 3
    assert heard == [
        "--workers 8 capped at 3 (3 rows): more processes than rows or cores only add start-up time"
    ]
    assert worker_processes.cap_workers(config, 2, heard.append) == 2 and len(heard) == 1


def test_html_without_its_extra_fails_before_the_first_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "jinja2", None)  # as on a base install
    out, page = tmp_path / "r.json", tmp_path / "r.html"
    code, stdout, stderr = run(["run", "--out", str(out), "--html", str(page)])
    assert (code, stdout) == (2, "")
    assert stderr == "error: the HTML report needs the 'html' extra: pip install 'ragbatch[html]'\n"
    assert not out.exists() and not page.exists()  # no row was evaluated, nothing written


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["run", "--concurrency", "0"],
            "invalid value for '--concurrency': Input should be greater than or equal to 1 "
            "(see ragbatch run --help)",
        ),
        (
            ["run", "--max-error-rate", "2"],
            "invalid value for '--max-error-rate': Input should be less than or equal to 1 "
            "(see ragbatch run --help)",
        ),
        (
            ["run", "--concurency", "3"],
            "no such option: --concurency (Possible options: --concurrency) "
            "(see ragbatch run --help)",
        ),
        (["gate", "r.json"], "missing option '--baseline' (see ragbatch gate --help)"),
        (["nosuch"], "no such command 'nosuch' (see ragbatch --help)"),
        (
            ["cache", "merge", "--nosuch"],
            "no such option: --nosuch (see ragbatch cache merge --help)",
        ),
    ],
)
def test_option_errors_are_one_line_with_exit_2(args: list[str], message: str) -> None:
    code, stdout, stderr = run(args)
    assert (code, stdout, stderr) == (2, "", f"error: {message}\n")


def test_help_is_still_help() -> None:
    code, stdout, _ = run(["run", "--help"])
    assert code == 0 and "--concurrency" in stdout
