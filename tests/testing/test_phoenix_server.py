"""PhoenixServer's failures, without Phoenix: a stand-in ``python`` that exits at once or never
becomes healthy (a shell script), so the error, the log's tail and the cleanup are seen.
A real Phoenix: tests/watch/test_phoenix_app.py."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from ragbatch.testing.phoenix import LOG_NAME, PhoenixError, PhoenixServer


def stand_in(tmp_path: Path, body: str) -> str:
    """An executable that PhoenixServer runs as ``python -m phoenix.server.main serve``."""
    script = tmp_path / "fake-python"
    script.write_text(f"#!/bin/sh\n{body}\n", encoding="utf-8")
    script.chmod(0o755)
    return str(script)


def test_an_exit_before_healthy_is_an_error_with_the_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PHOENIX_SQL_DATABASE_URL", "postgresql://elsewhere/db")
    python = stand_in(tmp_path, 'echo "args: $*"; env | grep ^PHOENIX_ | sort; exit 3')
    server = PhoenixServer(tmp_path / "work", python=python)
    with pytest.raises(PhoenixError) as caught:
        server.start()
    message = str(caught.value)
    assert "exited with code 3" in message
    lines = message.splitlines()
    assert lines[1:] == [
        "args: -m phoenix.server.main serve",
        f"PHOENIX_GRPC_PORT={server.grpc_port}",
        "PHOENIX_HOST=127.0.0.1",
        f"PHOENIX_PORT={server.port}",
        "PHOENIX_TELEMETRY_ENABLED=false",
        f"PHOENIX_WORKING_DIR={tmp_path / 'work'}",
    ]  # the environment's own PHOENIX_SQL_DATABASE_URL is not passed on
    assert (tmp_path / "work" / LOG_NAME).is_file() and not server.running


def test_not_healthy_in_time_is_an_error_and_the_process_is_stopped(tmp_path: Path) -> None:
    python = stand_in(tmp_path, "echo still starting; exec sleep 60")
    server = PhoenixServer(tmp_path, python=python, start_timeout=0.5)
    with pytest.raises(PhoenixError, match=r"not healthy at http://127\.0\.0\.1:\d+/healthz "
                                           r"within 0\.5 s(.|\n)*still starting"):  # fmt: skip
        server.start()
    assert not server.running and server._process is None


def test_phoenix_python_names_the_interpreter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    python = stand_in(tmp_path, "echo from the override; exit 4")
    monkeypatch.setenv("PHOENIX_PYTHON", python)
    with pytest.raises(PhoenixError, match=r"exited with code 4(.|\n)*from the override"):
        PhoenixServer(tmp_path).start()


def test_a_failed_start_in_with_removes_its_temporary_directory(tmp_path: Path) -> None:
    server = PhoenixServer(python=stand_in(tmp_path, "exit 1"))
    with pytest.raises(PhoenixError), server:
        pass
    assert not server.working_dir.exists()
    kept = PhoenixServer(tmp_path / "given", python=stand_in(tmp_path, "exit 1"))
    with pytest.raises(PhoenixError), kept:
        pass
    assert (tmp_path / "given" / LOG_NAME).is_file()  # a given directory is the caller's


HEALTHY_SERVER = """
import http.server, os
class Ok(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"OK")
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", int(os.environ["PHOENIX_PORT"])), Ok).serve_forever()
"""


def test_a_server_launched_long_before_the_wait_is_asked_at_least_once(tmp_path: Path) -> None:
    # its start-up ran beside other tests for longer than start_timeout: healthy is healthy
    (tmp_path / "ok.py").write_text(HEALTHY_SERVER, encoding="utf-8")
    python = stand_in(tmp_path, f'exec "{sys.executable}" "{tmp_path / "ok.py"}"')
    server = PhoenixServer(tmp_path / "work", python=python, start_timeout=0.5).launch()
    try:
        time.sleep(1.5)  # longer than start_timeout: the server is up before the wait begins
        assert server.wait_started() is server and server.running
    finally:
        server.close()
