"""The pytest plugin example of the CI gate guide (and the README), run as written in a project
that has its files."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from tests.conftest import NESTED_PYTEST

pytest_plugins = ("pytester",)
ROOT = Path(__file__).resolve().parent.parent
GUIDE = (ROOT / "docs" / "guides" / "ci-gate.md").read_text()


def readme_example() -> str:
    section = GUIDE[GUIDE.index("## Gate in your own test suite (pytest plugin)") :]
    found = re.search(r"```python\n(.*?)```", section, flags=re.S)
    assert found is not None
    return found[1]


@pytest.fixture
def project(pytester: pytest.Pytester, request: pytest.FixtureRequest) -> pytest.Pytester:
    """golden.jsonl, its recorded cache (cache/, the default) and reports/baseline.json."""
    shutil.copy(ROOT / "datasets" / "rag-fixture.jsonl", pytester.path / "golden.jsonl")
    shutil.copytree(ROOT / "cache", pytester.path / "cache")
    (pytester.path / "reports").mkdir()
    shutil.copy(ROOT / "reports" / "expected-report-jev.json",
                pytester.path / "reports" / "baseline.json")  # fmt: skip
    if not request.config.pluginmanager.has_plugin("ragbatch"):
        pytester.makeconftest('pytest_plugins = ["ragbatch.pytest_plugin"]')
    return pytester


def test_the_readme_example_passes_as_written(project: pytest.Pytester) -> None:
    project.makepyfile(test_quality=readme_example())
    result = project.runpytest_inprocess("-q", "-p", "no:cacheprovider", *NESTED_PYTEST)
    result.assert_outcomes(passed=1)


def test_an_all_miss_replay_says_so_instead_of_blaming_a_metric(project: pytest.Pytester) -> None:
    example = readme_example()
    assert 'model="jev-1.13.0", ' in example
    project.makepyfile(test_quality=example.replace('model="jev-1.13.0", ', ""))
    result = project.runpytest_inprocess("-q", "-p", "no:cacheprovider", *NESTED_PYTEST)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*ragbatch_gate: the report judged no row: all 48 rows failed (cache-miss 48), so there "
        "is nothing to gate; an offline replay found none of its replies in the cache: pass the "
        "model the cache was recorded with*",
    ])  # fmt: skip
    assert "Faithfulness" not in result.stdout.str()
