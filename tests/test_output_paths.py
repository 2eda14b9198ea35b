"""Every output option refuses a path it cannot write: exit 2, one ``error:`` line, nothing
left behind, and (for a run) before any call is sent."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragbatch.cli._app import app
from ragbatch.testing import JevServer
from tests.conftest import JEV_KEY

ROOT = Path(__file__).resolve().parent.parent
DATASET = str(ROOT / "datasets" / "rag-fixture.jsonl")
PRICING = str(ROOT / "pricing" / "typesafe-2026-12.json")
REPORT = str(ROOT / "reports" / "expected-report.json")
RUN = ("run", DATASET, "--pricing", PRICING, "--quiet")

# (command before the option, the option, command after it); the bad path follows the option
CASES = {
    "run --out": ((*RUN,), "--out", ()),
    "run --rows-out": ((*RUN, "--out", "{ok}"), "--rows-out", ()),
    "run --run-record": ((*RUN, "--out", "{ok}"), "--run-record", ()),
    "run --markdown": ((*RUN, "--out", "{ok}"), "--markdown", ()),
    "run --html": ((*RUN, "--out", "{ok}"), "--html", ()),
    "run --partial-out": ((*RUN, "--shard", "1/2"), "--partial-out", ()),
    "run --workers --out": ((*RUN, "--workers", "2"), "--out", ()),
    "run --workers --rows-out": ((*RUN, "--workers", "2", "--out", "{ok}"), "--rows-out", ()),
    "gate --markdown": (("gate", REPORT, "--baseline", REPORT), "--markdown", ()),
    "gate --junit": (("gate", REPORT, "--baseline", REPORT), "--junit", ()),
    "diff --markdown": (("diff", REPORT, REPORT), "--markdown", ()),
    "merge --out": (("merge", "{ok}"), "--out", ()),
    "calibrate --out": (("calibrate", REPORT), "--out", ()),
    "audit-sample --out": (("audit-sample", REPORT), "--out", ()),
    "infer --out": (("infer", REPORT, "--labels", REPORT), "--out", ()),
    "infer --markdown": (("infer", REPORT, "--labels", REPORT), "--markdown", ()),
    "infer --html": (("infer", REPORT, "--labels", REPORT), "--html", ()),
    "counterfactual --out": (("counterfactual", DATASET), "--out", ()),
    "schema --out": (("schema",), "--out", ()),
}


def files_under(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def bad_path(tmp_path: Path, kind: str) -> tuple[Path, str]:
    """A path that cannot be written as a file, and the end of the expected message."""
    if kind == "directory":
        target = tmp_path / "existing-dir"
        target.mkdir()
        return target, "is a directory; give a file path"
    blocker = tmp_path / "plain-file"
    blocker.write_text("not a directory\n")
    return blocker / "sub" / "out.json", f"{blocker} is not a directory"


@pytest.mark.parametrize("kind", ["directory", "under-a-file"])
@pytest.mark.parametrize("case", list(CASES))
def test_an_unwritable_output_is_one_error_line_and_leaves_nothing(
    tmp_path: Path, case: str, kind: str
) -> None:
    before, option, after = CASES[case]
    target, reason = bad_path(tmp_path, kind)
    ok = str(tmp_path / "ok.json")
    args = [a.replace("{ok}", ok) for a in (*before, option, str(target), *after)]
    existing = files_under(tmp_path)
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    assert result.stderr == f"error: {option} {target}: {reason}\n"
    assert files_under(tmp_path) == existing  # no report, no temporary file, no directory


def test_a_live_run_refuses_before_the_first_call(jev_server: JevServer, tmp_path: Path) -> None:
    target = tmp_path / "rows"
    target.mkdir()
    args = [
        *RUN, "--provider", "jev", "--base-url", jev_server.base_url, "--model", "jev-1.13.0",
        "--cache-dir", str(tmp_path / "cache"), "--out", str(tmp_path / "r.json"),
        "--rows-out", str(target),
    ]  # fmt: skip
    result = CliRunner().invoke(app, args, env={"TYPESAFE_API_KEY": JEV_KEY})
    assert result.exit_code == 2, result.output
    assert result.stderr == f"error: --rows-out {target}: is a directory; give a file path\n"
    assert jev_server.requests_total == 0
    assert files_under(tmp_path) == ["rows"]


def test_cache_merge_into_a_file_is_refused(tmp_path: Path) -> None:
    into = tmp_path / "not-a-cache"
    into.write_text("x\n")
    result = CliRunner().invoke(app, ["cache", "merge", str(ROOT / "cache"), "--into", str(into)])
    assert result.exit_code == 2, result.output
    assert result.stderr == f"error: --into {into}: is not a directory; give a cache directory\n"
