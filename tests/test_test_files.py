"""The test suite's own rules: no test module over 500 lines (the size rule of the code), and
tests marked slow run only where CI is set.

A file past 500 lines is split by topic, the tests moved verbatim, shared helpers into a small
module of the test package and shared fixtures into a conftest.py (tests/providers/ shows both).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import NESTED_PYTEST

pytest_plugins = ["pytester"]
TESTS = Path(__file__).resolve().parent
LIMIT = 500


def line_counts(root: Path) -> dict[str, int]:
    """Lines of every Python file under ``root``, by path relative to it."""
    return {
        path.relative_to(root).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
        for path in sorted(root.rglob("*.py"))
    }


def test_no_test_file_is_over_500_lines() -> None:
    counts = line_counts(TESTS)
    assert "test_test_files.py" in counts and "providers/conftest.py" in counts
    assert {path: n for path, n in counts.items() if n > LIMIT} == {}


def test_a_file_over_the_limit_is_found(tmp_path: Path) -> None:
    (tmp_path / "deep").mkdir()
    (tmp_path / "deep" / "test_long.py").write_text("x = 1\n" * (LIMIT + 1), encoding="utf-8")
    (tmp_path / "test_short.py").write_text("x = 1\n" * LIMIT, encoding="utf-8")
    counts = line_counts(tmp_path)
    assert {path: n for path, n in counts.items() if n > LIMIT} == {"deep/test_long.py": 501}


@pytest.mark.parametrize(
    ("ci", "outcome"), [("", "skipped"), ("false", "skipped"), ("true", "passed")]
)
def test_slow_tests_run_only_where_ci_is_set(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, ci: str, outcome: str
) -> None:
    monkeypatch.setenv("CI", ci)
    pytester.makeconftest("from tests.conftest import pytest_collection_modifyitems  # noqa: F401")
    pytester.makepyfile(
        "import pytest\n\n\n@pytest.mark.slow\ndef test_slow() -> None:\n    pass\n"
    )
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-W", "ignore", *NESTED_PYTEST)
    result.assert_outcomes(**{outcome: 1})
