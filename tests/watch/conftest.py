"""One real Phoenix server for the whole session (``phoenix``), and a fresh project name per
test (``phoenix_project``): tests share the server without seeing each other's spans.

Phoenix (``arize-phoenix``) and the OpenTelemetry SDK come with the ``test`` extra. Where they
are missing the tests are skipped, except under CI (``CI=true``), where that is a failure.
"""

from __future__ import annotations

import importlib.util
import os
import re
import uuid
from collections.abc import Iterator

import pytest

from ragbatch.testing.phoenix import PhoenixServer
from tests.conftest import is_ci

NEEDED = {
    "phoenix": "arize-phoenix",
    "opentelemetry.sdk": "opentelemetry-sdk",
    "opentelemetry.exporter.otlp.proto.http": "opentelemetry-exporter-otlp-proto-http",
}


def missing_packages() -> list[str]:
    """The distributions the Phoenix tests need that this interpreter lacks (Phoenix itself
    may run from another one: ``PHOENIX_PYTHON``)."""
    missing = []
    for module, distribution in NEEDED.items():
        if module == "phoenix" and os.environ.get("PHOENIX_PYTHON"):
            continue
        try:
            found = importlib.util.find_spec(module) is not None
        except ModuleNotFoundError:  # a parent package is missing
            found = False
        if not found:
            missing.append(distribution)
    return missing


_LAUNCHED: list[PhoenixServer] = []  # launched once the collected tests are known


def pytest_collection_finish(session: pytest.Session) -> None:
    """Launch Phoenix as soon as a collected test needs it, so that its start-up (10-15 s)
    runs beside the tests before the first that uses it."""
    if missing_packages() or _LAUNCHED:
        return
    if any("phoenix" in getattr(item, "fixturenames", ()) for item in session.items):
        _LAUNCHED.append(PhoenixServer().launch())


@pytest.fixture(scope="session")
def phoenix() -> Iterator[PhoenixServer]:
    """A real Phoenix on a free loopback port, started once, stopped at the end."""
    if missing := missing_packages():
        reason = f"a real Phoenix needs {', '.join(missing)} (pip install -e '.[test]')"
        if is_ci():
            pytest.fail(reason)
        pytest.skip(reason)
    server = _LAUNCHED.pop() if _LAUNCHED else PhoenixServer().launch()
    try:
        yield server.wait_started()
    finally:
        server.close()


@pytest.fixture
def phoenix_project(request: pytest.FixtureRequest) -> str:
    """A project name no other test uses (Phoenix makes a project on its first span)."""
    name = re.sub(r"[^A-Za-z0-9_-]+", "-", request.node.name)[:60]
    return f"{name}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def restartable(phoenix: PhoenixServer) -> Iterator[PhoenixServer]:
    """The session's server, running again after the test whatever happened in it (a test
    that stops it)."""
    yield phoenix
    if not phoenix.running:
        phoenix.start()


def pytest_sessionfinish(session: pytest.Session) -> None:
    """A Phoenix launched for tests that did not run after all (deselected, failed early)."""
    while _LAUNCHED:
        _LAUNCHED.pop().close()
