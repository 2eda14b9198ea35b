"""``ragbatch watch --once`` against a real Phoenix: every trace judged once, its verdicts
stored as the annotations ``export --format phoenix`` writes, the window's report the one
``run`` writes for the same spans."""

from __future__ import annotations

import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest
from typer.testing import CliRunner

from ragbatch.cli._app import app
from ragbatch.testing.otlp_app import RagApp, SentTrace
from ragbatch.testing.phoenix import PhoenixServer
from ragbatch.testing.rag_corpus import OVERLAP_DIAGNOSIS
from tests.watch._watching import annotations_on, check_exactly_once, watch_argv

BACKFILL = ("--since", "2000-01-01", "--idle-s", "0", "--interval-s", "0.1")


def send(phoenix: PhoenixServer, project: str, n: int, seed: int) -> list[SentTrace]:
    """``n`` traces, exported and stored by Phoenix before this returns."""
    there = len(phoenix.spans(project))
    with RagApp(phoenix.url, project, seed, multi_hop=0.3) as rag:
        sent = rag.send(n)
        rag.flush()
    phoenix.wait_for_spans(project, there + sum(len(t.span_ids) for t in sent))
    return sent


def invoke(*argv: str) -> Any:
    return CliRunner().invoke(app, list(argv))


def file_run(phoenix: PhoenixServer, project: str, tmp: Path) -> tuple[Path, Path]:
    """``ragbatch run`` on Phoenix's own export of the project's spans, and its export."""
    spans = tmp / "spans.json"
    spans.write_bytes(orjson.dumps(phoenix.spans(project)))
    report, records = tmp / "file-report.json", tmp / "records.jsonl"
    result = invoke("run", str(spans), "--format", "openinference", "--baseline", "lexical",
                    "--out", str(report), "--quiet")  # fmt: skip
    assert result.exit_code == 0, result.output
    result = invoke("export", str(report), "--format", "phoenix", "--out", str(records))
    assert result.exit_code == 0, result.output
    return report, records


def test_once_stores_exactly_what_export_writes_for_the_same_spans(
    phoenix: PhoenixServer, phoenix_project: str, tmp_path: Path
) -> None:
    sent = send(phoenix, phoenix_project, 24, seed=3)
    result = invoke(*watch_argv(phoenix.url, phoenix_project, tmp_path, "--once", *BACKFILL))
    assert result.exit_code == 0, result.output
    assert "judged 24 traces in " in result.stdout
    found = check_exactly_once(phoenix, phoenix_project, sent)
    _, records = file_run(phoenix, phoenix_project, tmp_path)
    expected = {(r["span_id"], r["name"]): r for r in map(orjson.loads, records.read_bytes().splitlines())}  # fmt: skip
    stored = {(a["span_id"], a["name"]): a for a in found}
    assert stored.keys() == expected.keys()
    for key, record in expected.items():
        kept = stored[key]
        assert (kept["result"], kept["metadata"], kept["identifier"], kept["annotator_kind"]) == (
            record["result"], record["metadata"], record["identifier"], "LLM"
        )  # fmt: skip
    verdicts = {a["span_id"]: a["result"]["label"] for a in found if a["name"] == "ragbatch"}
    by_kind = Counter((t.kind, verdicts[t.root_span_id]) for t in sent)
    assert {kind for kind, _ in by_kind} == set(OVERLAP_DIAGNOSIS)  # a mix of verdicts
    assert any(name == "ragbatch.step" for _, name in stored)  # multi-hop traces' steps
    # a second --once finds nothing new and stores nothing again
    again = invoke(*watch_argv(phoenix.url, phoenix_project, tmp_path, "--once", *BACKFILL))
    assert again.exit_code == 0, again.output
    assert "judged" not in again.stdout
    assert annotations_on(phoenix, phoenix_project, sent) == found


def test_the_window_report_is_the_file_run_s_report_of_the_same_traces(
    phoenix: PhoenixServer, phoenix_project: str, tmp_path: Path
) -> None:
    sent = send(phoenix, phoenix_project, 12, seed=5)
    every = 2.0
    # the window holding the traces closes once its end is behind the last poll (a real wait:
    # windows are wall-clock time)
    ends = time.time() + every + 0.2
    while time.time() < ends:
        time.sleep(0.1)
    argv = watch_argv(phoenix.url, phoenix_project, tmp_path, "--once", *BACKFILL,
                      "--report-every", f"{every}s", "--audit-rate", "0.5")  # fmt: skip
    result = invoke(*argv)
    assert result.exit_code == 0, result.output
    windows = sorted((tmp_path / "reports").glob("*Z.json"))
    assert windows, result.output
    reports = [orjson.loads(p.read_bytes()) for p in windows]
    file_report, _ = file_run(phoenix, phoenix_project, tmp_path)
    whole = orjson.loads(file_report.read_bytes())
    assert [row for r in reports for row in r["rows"]] == whole["rows"]
    assert sum(r["window"]["judged"] for r in reports) == len(sent) == whole["dataset"]["rows"]
    if len(reports) == 1:  # the usual case: all in one window
        assert reports[0]["modes"] == whole["modes"]
        assert reports[0]["dataset"]["name"] == f"phoenix:{phoenix_project}"
    audit = [orjson.loads(line) for p in windows for line in p.with_suffix(".audit.jsonl").read_bytes().splitlines()]  # fmt: skip
    labelled = [line for line in audit if "id" in line]
    assert labelled and all(line["human"]["diagnosis"] is None for line in labelled)
    assert all("question" in line or "steps" in line for line in labelled)


def test_a_new_watcher_leaves_the_traces_already_there_alone(
    phoenix: PhoenixServer, phoenix_project: str, tmp_path: Path
) -> None:
    before = send(phoenix, phoenix_project, 5, seed=7)
    argv = watch_argv(phoenix.url, phoenix_project, tmp_path, "--once", "--idle-s", "0")
    first = invoke(*argv)
    assert first.exit_code == 0, first.output
    assert annotations_on(phoenix, phoenix_project, before) == []
    after = send(phoenix, phoenix_project, 4, seed=8)
    second = invoke(*argv)
    assert second.exit_code == 0, second.output
    check_exactly_once(phoenix, phoenix_project, after)
    assert annotations_on(phoenix, phoenix_project, before) == []


def test_sample_rate_judges_the_traces_the_hash_picks(
    phoenix: PhoenixServer, phoenix_project: str, tmp_path: Path
) -> None:
    from ragbatch.watch._loop import sampled

    sent = send(phoenix, phoenix_project, 20, seed=9)
    argv = watch_argv(phoenix.url, phoenix_project, tmp_path, "--once", *BACKFILL,
                      "--sample-rate", "0.5")  # fmt: skip
    result = invoke(*argv)
    assert result.exit_code == 0, result.output
    judged = {a["span_id"] for a in annotations_on(phoenix, phoenix_project, sent)
              if a["name"] == "ragbatch"}  # fmt: skip
    picked = {t.root_span_id for t in sent if sampled(t.trace_id, 0.5)}
    assert judged == picked and 0 < len(picked) < len(sent)


def test_until_judges_only_the_traces_that_started_before_it(
    phoenix: PhoenixServer, phoenix_project: str, tmp_path: Path
) -> None:
    early = send(phoenix, phoenix_project, 4, seed=15)
    until = datetime.now(UTC).replace(tzinfo=None)  # no offset: read as UTC
    # the next traces start after it: their spans are dated a few ms before they are sent
    while datetime.now(UTC).replace(tzinfo=None) < until + timedelta(milliseconds=200):
        time.sleep(0.02)
    late = send(phoenix, phoenix_project, 3, seed=16)
    argv = watch_argv(phoenix.url, phoenix_project, tmp_path, "--once", *BACKFILL,
                      "--until", until.isoformat())  # fmt: skip
    result = invoke(*argv)
    assert result.exit_code == 0, result.output
    check_exactly_once(phoenix, phoenix_project, early)
    assert annotations_on(phoenix, phoenix_project, late) == []


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--phoenix", "http://127.0.0.1:6006/v1"), "give the server's base URL, without /v1"),
        (("--phoenix", "ftp://127.0.0.1"), "is not an http:// or https:// URL with a host"),
        (("--phoenix", "http://127.0.0.1:9", "--report-every", "soon"), "a duration such as"),
        (("--phoenix", "http://127.0.0.1:9", "--since", "yesterday"), "an ISO 8601 time"),
        (("--phoenix", "http://127.0.0.1:9", "--project", "a/b"), "without / ? #"),
        (("--phoenix", "http://127.0.0.1:9", "--report-dir", str(Path(__file__))), "--report-dir"),
    ],
)
def test_bad_options_are_one_error_line(
    argv: tuple[str, ...], message: str, tmp_path: Path
) -> None:
    result = invoke("watch", "--cache-dir", str(tmp_path / "c"), *argv)
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("error: ") and message in result.stderr
    assert result.stderr.count("\n") == 1
