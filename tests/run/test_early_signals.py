"""A SIGTERM that lands while ``ragbatch run`` is still checking its options ends it with 143.

The run reads its pricing snapshot from a FIFO: the test opens the writing end, which returns
once the run is inside its checks (blocked reading the snapshot), sends SIGTERM, then lets the
read finish. The run must neither die of the signal (-15) nor go on to send requests: it stops
before its first request (one process) or before its first worker starts (``--workers 2``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from ragbatch.testing import JevServer
from tests.conftest import JEV_KEY

ROOT = Path(__file__).resolve().parents[2]
DATASET = ROOT / "datasets" / "rag-fixture.jsonl"
PRICING = ROOT / "pricing" / "typesafe-2026-12.json"


def open_writer(fifo: Path, limit_s: float) -> int:
    """The FIFO's writing end, once a reader opened it (within ``limit_s``)."""
    opened: list[int] = []
    opener = threading.Thread(target=lambda: opened.append(os.open(fifo, os.O_WRONLY)))
    opener.daemon = True  # left blocked if the run never reads the snapshot
    opener.start()
    opener.join(limit_s)
    assert opened, "the run never read its pricing snapshot"
    return opened[0]


@pytest.mark.parametrize(
    ("extra", "stopped"),
    [
        ((), "interrupted by SIGTERM after 0 rows:"),
        (("--workers", "2"), "interrupted by SIGTERM: the workers stopped,"),
    ],
)
def test_sigterm_during_the_checks_ends_the_run_with_143_before_any_request(
    tmp_path: Path, extra: tuple[str, ...], stopped: str
) -> None:
    fifo = tmp_path / "pricing.json"
    os.mkfifo(fifo)
    with JevServer(api_key=JEV_KEY) as server:
        command = [
            sys.executable, "-m", "ragbatch", "run", str(DATASET), "--provider", "jev",
            "--base-url", server.base_url, "--model", "jev-1.13.0", "--no-cache",
            "--out", str(tmp_path / "r.json"), "--pricing", str(fifo), "--quiet", *extra,
        ]  # fmt: skip
        env = {**os.environ, "TYPESAFE_API_KEY": JEV_KEY}
        proc = subprocess.Popen(command, cwd=ROOT, env=env, stderr=subprocess.PIPE)
        try:
            writer = open_writer(fifo, limit_s=60)
            proc.send_signal(signal.SIGTERM)
            with os.fdopen(writer, "wb") as handle:
                handle.write(PRICING.read_bytes())
            _, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert proc.returncode == 143, err.decode()
        assert err.decode().splitlines() == [
            f"error: {stopped} no report written; nothing was cached (no reply cache in this "
            "run), so a rerun starts from the first row"
        ]
        assert server.requests_total == 0
    assert not (tmp_path / "r.json").exists()
