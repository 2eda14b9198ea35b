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


@pytest.fixture(scope="session")
def phoenix() -> Iterator[PhoenixServer]:
    """A real Phoenix on a free loopback port, started once (about 10-15 s), stopped at the end."""
    if missing := missing_packages():
        reason = f"a real Phoenix needs {', '.join(missing)} (pip install -e '.[test]')"
        if is_ci():
            pytest.fail(reason)
        pytest.skip(reason)
    with PhoenixServer() as server:
        yield server


@pytest.fixture
def phoenix_project(request: pytest.FixtureRequest) -> str:
    """A project name no other test uses (Phoenix makes a project on its first span)."""
    name = re.sub(r"[^A-Za-z0-9_-]+", "-", request.node.name)[:60]
    return f"{name}-{uuid.uuid4().hex[:8]}"
