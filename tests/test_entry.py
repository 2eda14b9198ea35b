"""The ``ragbatch`` program ends without tearing the interpreter down, and nobody can tell
but by the time it takes: the exit status, atexit callbacks, non-daemon threads and the
standard streams are as Python's own exit leaves them (``ragbatch.cli.entry``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def program(prelude: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``ragbatch ARGS`` as the console script runs it, after ``prelude``."""
    code = (
        "import sys\n" + prelude + "\nfrom ragbatch.cli import entry\n"
        f"sys.argv = ['ragbatch', *{list(args)!r}]\nentry()\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT
    )


def test_the_version_exits_0_with_its_line_and_the_atexit_callbacks_run() -> None:
    done = program("import atexit; atexit.register(lambda: print('bye', file=sys.stderr))",
                   "--version")  # fmt: skip
    assert done.returncode == 0
    assert done.stdout.startswith("ragbatch ") and done.stderr == "bye\n"


def test_a_usage_error_keeps_its_status_and_its_one_line() -> None:
    done = program("", "run", "--no-such-option")
    assert done.returncode == 2
    assert done.stderr.count("error:") == 1 and "Traceback" not in done.stderr


def test_a_run_writes_its_report_and_exits_0(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    done = program("", "run", "datasets/rag-fixture.jsonl", "--out", str(out), "--no-cache",
                   "--quiet")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert out.read_bytes() == (ROOT / "reports" / "expected-report.json").read_bytes()


def test_a_non_daemon_thread_is_joined_before_the_process_ends(tmp_path: Path) -> None:
    mark = tmp_path / "written-by-the-thread"
    prelude = (
        "import threading, time, pathlib\n"
        "def late():\n"
        "    time.sleep(0.3)\n"
        f"    pathlib.Path({str(mark)!r}).write_text('done')\n"
        "threading.Thread(target=late).start()"
    )
    assert program(prelude, "--version").returncode == 0
    assert mark.read_text() == "done"


@pytest.mark.parametrize(
    ("raised", "status", "said"),
    [("None", 0, "bye\n"), ("3", 3, "bye\n"), ("'a message'", 1, "a message\nbye\n")],
)
def test_systemexit_ends_as_python_ends_it(raised: str, status: int, said: str) -> None:
    prelude = (
        "import atexit, ragbatch.cli\n"
        "atexit.register(lambda: print('bye', file=sys.stderr))\n"
        f"def main(): raise SystemExit({raised})\n"
        "ragbatch.cli.main = main"
    )
    done = program(prelude)
    assert (done.returncode, done.stderr) == (status, said)
    # Python's own ending (main, not entry: the SystemExit reaches the interpreter)
    python = subprocess.run(
        [sys.executable, "-c", "import sys\n" + prelude + "\nragbatch.cli.main()"],
        capture_output=True, text=True, cwd=ROOT,
    )  # fmt: skip
    assert (python.returncode, python.stderr) == (status, said)


def test_the_teardown_is_skipped() -> None:
    """The point of it: a module-level object's finalizer, which Python's teardown would run,
    does not run (buffered output of our own files is flushed and closed before: every other
    test of the program checks its files)."""
    prelude = (
        "class Noisy:\n"
        "    def __del__(self):\n"
        "        print('torn down', file=sys.stderr)\n"
        "kept = Noisy()"
    )
    done = program(prelude, "--version")
    assert done.returncode == 0 and "torn down" not in done.stderr
