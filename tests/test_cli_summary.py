"""What the terminal says after a run, and the one-line errors and warnings around options."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

from ragbatch.cli._app import app
from ragbatch.run import _workers as worker_processes
from ragbatch.run._options import RunOptions
from ragbatch.run._shards import shard_of

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "datasets/rag-fixture.jsonl"


def run(args: list[str]) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, args)
    return result.exit_code, result.stdout, result.stderr


def test_failed_rows_are_summarised_by_kind_with_what_to_do(tmp_path: Path) -> None:
    rows = [orjson.loads(line) for line in FIXTURE.read_bytes().splitlines()[:5]]
    for row in rows:  # a mock block without the answer to one question
        del row["mock"]["generation"]["relevance"]
        row.pop("baseline", None)
    sample = tmp_path / "partial.jsonl"
    sample.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in rows))
    out = tmp_path / "r.json"
    code, stdout, _ = run(["run", str(sample), "--out", str(out)])
    assert code == 3
    lines = stdout.splitlines()
    start = lines.index("  Jev failures by kind:")
    first = rows[0]["id"]
    assert lines[start : start + 6] == [
        "  Jev failures by kind:",
        f"    mock-missing-answer: 5 rows; first {first}: mock block of row '{first}' has no "
        "answer for question 'answerRelevance'",
        "      what to do: these rows' mock blocks lack an answer Jev is asked; use --provider "
        "jev (the live Jev API, through the cache) or complete the blocks",
        "  baseline failures by kind:",
        f"    no-baseline: 5 rows; first {first}: row '{first}' has no baseline verdict",
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
    config = RunOptions.of(quiet=True, dataset=small)
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
    assert stderr == (
        "error: the HTML report needs the 'html' extra: pip install 'ragbatch[html]' (in a "
        "source checkout: pip install -e '.[html]')\n"
    )
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


def test_policy_with_a_threshold_flag_is_refused(tmp_path: Path) -> None:
    policy = tmp_path / "policy.json"
    code, stdout, stderr = run(["run", "--policy", str(policy), "--fail-threshold", "0.1"])
    assert (code, stdout) == (2, "")
    assert stderr == (
        "error: --fail-threshold and --policy cannot be used together: the policy file sets its "
        "own thresholds (refit them with `ragbatch calibrate`)\n"
    )
    both = ["--fail-threshold", "0.1", "--pass-threshold", "0.9"]
    code, _, stderr = run(["run", "--policy", str(policy), *both])
    assert code == 2
    assert stderr.startswith("error: --fail-threshold, --pass-threshold and --policy cannot")


def test_slice_by_a_field_no_row_has_is_refused_naming_the_fields(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    code, stdout, stderr = run(["run", "--slice-by", "nosuchfield", "--out", str(out)])
    assert (code, stdout) == (2, "")
    assert stderr == (
        "error: --slice-by nosuchfield: no row of datasets/rag-fixture.jsonl has this metadata "
        "field; fields in the rows' metadata: difficulty, lang, topic\n"
    )
    assert not out.exists()
    code, _, stderr = run(["run", "--slice-by", "topic", "--out", str(out), "--quiet"])
    assert (code, stderr) == (0, "")


def test_slice_by_a_nested_field_one_row_has_is_fine(tmp_path: Path) -> None:
    rows = FIXTURE.read_text().splitlines()
    last = orjson.loads(rows[-1])
    last["metadata"]["source"] = {"team": "search"}
    data = tmp_path / "d.jsonl"
    data.write_text("\n".join([*rows[:-1], orjson.dumps(last).decode()]) + "\n")
    args = ["run", str(data), "--out", str(tmp_path / "r.json"), "--quiet"]
    assert run([*args, "--slice-by", "source.team"])[0] == 0
    code, _, stderr = run([*args, "--slice-by", "source.tem"])
    assert code == 2
    assert stderr.endswith(
        "fields in the rows' metadata: difficulty, lang, source, source.team, topic\n"
    )


def test_sentence_claims_with_cited_evidence_warn(tmp_path: Path) -> None:
    claims = ROOT / "datasets/claims-fixture.jsonl"
    args = ["run", str(claims), "--groundedness", "claims", "--out", str(tmp_path / "r.json")]
    code, _, stderr = run([*args, "--claim-extractor", "sentences", "--quiet"])
    assert code == 0
    assert stderr == (
        "warning: --claim-extractor sentences does not parse citations, so with --claim-evidence "
        "cited every claim is a missing citation; use --claim-evidence context (every retrieved "
        "passage) or claims with citations (--claim-extractor provided)\n"
    )
    context = ["--claim-extractor", "sentences", "--claim-evidence", "context", "--quiet"]
    assert run([*args, *context])[2] == ""  # no warning (rows may fail: no mock for sentences)
