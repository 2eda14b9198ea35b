"""Shared fixtures: real Jev test servers on 127.0.0.1 (started per test, always stopped)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ragbatch.run._options import RunOptions
from ragbatch.testing import JevServer

ROOT = Path(__file__).resolve().parent.parent
JEV_KEY = "test-key"


def is_ci() -> bool:
    """Whether ``CI`` is set to something true, as CI services set it (``CI=true``)."""
    return os.environ.get("CI", "").strip().lower() not in {"", "0", "false", "no"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``slow`` run under CI (``CI=true``, as ``.ci/run`` sets it): the same
    ``pytest`` skips them elsewhere, so a newcomer's first run stays short."""
    if is_ci():
        return
    skip = pytest.mark.skip(reason="slow: runs where CI=true (CI=true pytest runs it here)")
    for item in items:
        if item.get_closest_marker("slow") is not None:
            item.add_marker(skip)


@pytest.fixture
def anyio_backend() -> str:
    """Async tests run on asyncio (tenacity and the provider are only used there)."""
    return "asyncio"


@pytest.fixture
def jev_server() -> Iterator[JevServer]:
    """A fresh Jev server on a random loopback port with key ``test-key``."""
    with JevServer(api_key=JEV_KEY) as server:
        yield server


@pytest.fixture
def start_jev_server() -> Iterator[Callable[..., JevServer]]:
    """Start servers with custom options (latency, token bucket, ...); all stopped at the end."""
    started: list[JevServer] = []

    def start(**options: Any) -> JevServer:
        server = JevServer(**{"api_key": JEV_KEY, **options}).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


def job_config(server: JevServer, tmp_path: Path, **changes: Any) -> RunOptions:
    """A live-Jev job on the fixture against ``server``, writing under ``tmp_path``."""
    config = RunOptions.of(
        quiet=True,
        provider="jev",
        base_url=server.base_url,
        api_key=JEV_KEY,
        model="jev-1.13.0",
        cache_dir=tmp_path / "cache",
        dataset=ROOT / "datasets" / "rag-fixture.jsonl",
        out=tmp_path / "r.json",
        pricing=ROOT / "pricing" / "typesafe-2026-12.json",
        concurrency=8,
    )
    return config.replace(**changes)


# A nested pytest (pytester) reads no ini of ours: it would load arize-phoenix-client's plugin,
# which imports all of Phoenix, and pytester's module snapshot then breaks the next such import
NESTED_PYTEST = ("-p", "no:phoenix")


@pytest.fixture
def small_fs(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Path]:
    """A 64 KiB tmpfs: room for one rows file of the fixture, not for two (the size can be
    changed by indirect parametrization)."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a small tmpfs needs root")
    size = getattr(request, "param", "64k")
    folder = tmp_path / "small"
    folder.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)])
    if mounted.returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True)


def fill(folder: Path) -> None:
    """Take every free byte of ``folder``'s file system."""
    with (folder / "filler").open("wb", buffering=0) as handle:
        try:
            while True:
                handle.write(b"\0" * 4096)
        except OSError:
            pass
