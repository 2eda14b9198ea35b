"""``--retrieval-tool``, ``--flatten`` and ``--steps`` are source options of every command that
reads a dataset; ``ragbatch parse`` shows what they do, writes ``--out`` whole or not at all,
says what is wrong with bad input in one line with exit 2, and never calls a judge."""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import typer
from typer.testing import CliRunner

from ragbatch.cli._app import app
from ragbatch.core import Row
from ragbatch.data import native_line, open_dataset

ROOT = Path(__file__).resolve().parent.parent
CONVERSATIONS = ROOT / "tests/fixtures/real/traces/conversations"
LANGFUSE = CONVERSATIONS / "langfuse-3.14.6-trace-get.jsonl"
RAGAS = CONVERSATIONS / "ragas-0.4.3-to-jsonl.jsonl"
NEW = ("retrieval_tools", "flatten", "steps")
COMMANDS = typer.main.get_command(app).commands  # type: ignore[attr-defined]


def invoke(*args: str | Path) -> Any:
    return CliRunner().invoke(app, ["parse", *map(str, args)])


def lines_of(result: Any) -> list[dict[str, Any]]:
    assert result.exit_code == 0, result.stderr
    return [orjson.loads(line) for line in result.stdout_bytes.splitlines()]


def declaration(param: Any) -> tuple[Any, ...]:
    return (param.opts, param.secondary_opts, param.help, param.envvar, param.multiple,
            param.is_flag, param.default)  # fmt: skip


@pytest.mark.parametrize(
    "command", ["parse", "estimate", "counterfactual", "audit-sample", "infer"]
)
def test_every_command_that_reads_a_dataset_takes_the_trace_options(command: str) -> None:
    run = {p.name: p for p in COMMANDS["run"].params}
    own = {p.name: p for p in COMMANDS[command].params}
    for name in NEW:
        assert declaration(own[name]) == declaration(run[name]), (command, name)
    assert run["retrieval_tools"].opts == ["--retrieval-tool"] and run["retrieval_tools"].multiple
    assert (run["flatten"].opts, run["steps"].opts) == (["--flatten"], ["--steps"])


def test_parse_has_no_judge_cache_or_output_options_of_a_run() -> None:
    own = {p.name for p in COMMANDS["parse"].params}
    assert own == {"dataset", "format", "mapping", "outputs", "ignore_unknown_fields", *NEW,
                   "out"}  # fmt: skip
    result = invoke(LANGFUSE, "--format", "langfuse", "--provider", "jev")
    assert (result.exit_code, result.stderr, result.stdout_bytes) == (
        2, "error: no such option: --provider (see ragbatch parse --help)\n", b"")  # fmt: skip


def test_flatten_prints_the_one_row_view_of_every_trace() -> None:
    expected = json.loads((CONVERSATIONS / "expected.json").read_text("utf-8"))["files"]
    sessions, records = expected[LANGFUSE.name]["sessions"], expected[LANGFUSE.name]["records"]
    traces = lines_of(invoke(LANGFUSE, "--format", "langfuse"))
    assert len(traces) == len(sessions) + sum(not r["sessionId"] for r in records)
    assert sum("steps" in line for line in traces) > len(sessions)  # sessions and agent traces
    flat = invoke(LANGFUSE, "--format", "langfuse", "--flatten")
    old = list(open_dataset(LANGFUSE, "langfuse"))  # the single-turn reader's rows
    assert flat.stdout_bytes == b"".join(native_line(row) for row in old)
    assert len(old) == 11 and flat.stderr == f"parse: 11 items of {LANGFUSE} (11 rows, 0 traces)\n"


def test_a_named_retrieval_tool_gives_retrieval_steps() -> None:
    # ragas joins a tool's passages as text: without its name the tool is a tool step
    plain = lines_of(invoke(RAGAS, "--format", "ragas"))[0]
    assert [s["kind"] for s in plain["steps"]] == ["user", "tool", "tool", "answer"]
    named = lines_of(invoke(RAGAS, "--format", "ragas", "--retrieval-tool", "search_docs"))[0]
    assert [s["kind"] for s in named["steps"]] == ["user", "retrieval", "retrieval", "answer"]
    for tool, hop in zip(plain["steps"][1:3], named["steps"][1:3], strict=True):
        assert hop["query"] == tool["input"]["query"]
        assert [c["text"] for c in hop["contexts"]] == tool["output"].split("\n\n")
        assert [c["id"] for c in hop["contexts"]] == ["c1", "c2"]
    # another tool's name changes nothing here; repeated, both count
    both = invoke(RAGAS, "--format", "ragas", "--retrieval-tool", "nope",
                  "--retrieval-tool", "search_docs")  # fmt: skip
    assert lines_of(both)[0] == named


def test_out_writes_the_lines_to_the_file_and_nothing_to_stdout(tmp_path: Path) -> None:
    shown = invoke(RAGAS, "--format", "ragas")
    out = tmp_path / "new" / "parsed.jsonl"
    result = invoke(RAGAS, "--format", "ragas", "--out", out)
    assert result.exit_code == 0 and result.stdout_bytes == b""
    assert out.read_bytes() == shown.stdout_bytes
    assert result.stderr == shown.stderr.replace("\n", f", written to {out}\n")


def write(path: Path, *records: Any) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


ROW = {"id": "r1", "question": "q", "contexts": [{"id": "c1", "text": "t"}], "answer": "a"}
TRACE = {"id": "t1", "steps": [{"kind": "user", "text": "q"}, {"kind": "answer", "text": "a"}]}


def test_bad_input_is_one_error_line_and_exit_2(tmp_path: Path) -> None:
    bad = write(tmp_path / "bad.jsonl", ROW, TRACE | {"steps": [{"kind": "answer", "text": "a"}]})
    out = tmp_path / "out.jsonl"
    out.write_bytes(b"before\n")
    cases = {
        (bad,): f"{bad}:2: steps[0]: a trace starts with a user step (the question), not 'answer'",
        (bad, "--out", out): f"{bad}:2: steps[0]: a trace starts with a user step (the "
        "question), not 'answer'",
        (tmp_path / "none.jsonl",): f"{tmp_path / 'none.jsonl'}: cannot read dataset: No such "
        "file or directory",
        (LANGFUSE, "--format", "langfuse", "--flatten", "--steps"): "--flatten gives one row "
        "per trace; it cannot also keep every step",
        (RAGAS, "--format", "ragas", "--retrieval-tool", ""): "--retrieval-tool needs a tool name",
        (bad, "--format", "traces"): "unknown dataset format 'traces'; choose from jsonl, "
        "ragas, csv, golden-yaml, deepeval, openinference, langfuse",
        (bad, "--out", tmp_path): f"--out {tmp_path}: is a directory; give a file path",
    }
    for args, message in cases.items():
        result = invoke(*args)
        assert (result.exit_code, result.stderr) == (2, f"error: {message}\n"), args
    # --out: the old file as it was, no temporary file beside it
    assert out.read_bytes() == b"before\n" and sorted(tmp_path.iterdir()) == [bad, out]


def test_a_command_that_reads_rows_refuses_a_trace_unless_flattened(tmp_path: Path) -> None:
    dataset = write(tmp_path / "d.jsonl", ROW, TRACE)
    args = ["counterfactual", str(dataset), "--out", str(tmp_path / "cf.jsonl")]
    result = CliRunner().invoke(app, args)
    assert (result.exit_code, result.stderr) == (2, (
        f"error: {dataset}: t1 is a multi-step trace, and this command reads rows; give "
        "--flatten to read each trace as one row\n"))  # fmt: skip
    result = CliRunner().invoke(app, [*args, "--flatten"])
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith(
        f"wrote 0 counterfactual rows to {tmp_path / 'cf.jsonl'} (2 read;"
    )


@pytest.fixture
def judge() -> Iterator[tuple[str, list[str]]]:
    """A server on 127.0.0.1 that records every request it gets (and fails them)."""
    seen: list[str] = []

    class Recorder(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            seen.append(f"{self.command} {self.path}")
            self.send_response(500)
            self.end_headers()

        do_GET = do_POST

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", seen
    server.shutdown()
    server.server_close()
    thread.join()


def test_the_program_prints_pure_jsonl_and_calls_no_judge(
    tmp_path: Path, judge: tuple[str, list[str]]
) -> None:
    url, seen = judge
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TYPESAFE_BASE_URL": url,
           "TYPESAFE_API_KEY": "sk-test-never-used", "RAGBATCH_JUDGE_BASE_URL": url}  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "ragbatch", "parse", str(RAGAS), "--format", "ragas"],
        capture_output=True, cwd=tmp_path, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == invoke(RAGAS, "--format", "ragas").stdout_bytes
    assert all(isinstance(orjson.loads(line), dict) for line in done.stdout.splitlines())
    assert done.stderr.decode().count("\n") == 1 and done.stderr.startswith(b"parse: 7 items")
    assert seen == [] and list(tmp_path.iterdir()) == []  # no request, no cache


def test_rows_print_as_the_rows_they_are() -> None:
    path = ROOT / "datasets/samples/ragas-sample.jsonl"
    result = invoke(path, "--format", "ragas")
    assert result.stdout_bytes == b"".join(native_line(r) for r in open_dataset(path, "ragas"))
    rows = [Row.model_validate(line) for line in lines_of(result)]
    assert result.stderr == f"parse: {len(rows)} items of {path} ({len(rows)} rows, 0 traces)\n"


def test_a_reader_that_stops_early_ends_parse_quietly(tmp_path: Path) -> None:
    # more lines than a pipe holds, so parse is still writing when the reader goes away
    rows = [ROW | {"id": f"r{i}", "answer": "a" * 200} for i in range(2000)]
    dataset = write(tmp_path / "many.jsonl", *rows)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with subprocess.Popen(
        [sys.executable, "-m", "ragbatch", "parse", str(dataset)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
    ) as program:  # fmt: skip
        assert program.stdout is not None and program.stderr is not None
        assert orjson.loads(program.stdout.readline())["id"] == "r0"
        program.stdout.close()
        stderr = program.stderr.read()
    assert (program.returncode, stderr) == (0, b"")
