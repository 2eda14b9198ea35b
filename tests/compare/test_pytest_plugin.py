"""The pytest plugin: ``ragbatch_gate`` fails a project's test with the gate's Markdown."""

from __future__ import annotations

import tomllib
from pathlib import Path

import orjson
import pytest

from ragbatch.compare._gate import gate, gate_markdown
from tests.compare.test_gate_cli import REPORT, regressed
from tests.conftest import NESTED_PYTEST

pytest_plugins = ("pytester",)
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def project(pytester: pytest.Pytester, request: pytest.FixtureRequest) -> pytest.Pytester:
    """A project with a passing and a regressed report beside its tests."""
    base = orjson.loads(REPORT.read_bytes())
    (pytester.path / "main.json").write_bytes(REPORT.read_bytes())
    (pytester.path / "regressed.json").write_bytes(orjson.dumps(regressed(base, flips=30)))
    # installed, the entry point loads the plugin; in a checkout, name it
    if not request.config.pluginmanager.has_plugin("ragbatch"):
        pytester.makeconftest('pytest_plugins = ["ragbatch.pytest_plugin"]')
    return pytester


def test_the_plugin_is_a_pytest11_entry_point() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert project["project"]["entry-points"]["pytest11"] == {"ragbatch": "ragbatch.pytest_plugin"}


def test_a_regression_fails_the_test_with_the_gates_markdown(project: pytest.Pytester) -> None:
    project.makepyfile(
        test_quality="""
        def test_same(ragbatch_gate):
            result = ragbatch_gate("main.json", baseline="main.json")
            assert result.passed

        def test_regressed(ragbatch_gate):
            ragbatch_gate("regressed.json", baseline="main.json")
            raise AssertionError("not reached")
        """
    )
    run = project.runpytest("-q", *NESTED_PYTEST)
    run.assert_outcomes(passed=1, failed=1)
    markdown = gate_markdown(
        gate(
            orjson.loads((project.path / "regressed.json").read_bytes()),
            orjson.loads(REPORT.read_bytes()),
        )
    )
    assert markdown.startswith("## ragbatch gate: FAIL: regression")
    output = run.stdout.str()
    for line in markdown.splitlines():
        assert line in output  # the whole Markdown, line by line, as the failure's message
    assert "not reached" not in output
    assert "Traceback" not in output and "def test_regressed" not in output  # no pytrace


def test_reports_in_memory_rules_and_bad_input(project: pytest.Pytester) -> None:
    project.makepyfile(
        test_forms="""
        import json, pathlib

        import ragbatch
        from paths import FIXTURE, PRICING

        def test_dict_and_evaluation(ragbatch_gate):
            rows = [json.loads(l) for l in open(FIXTURE)]
            result = ragbatch.evaluate(rows, pricing=PRICING)
            base = json.loads(pathlib.Path("main.json").read_text())
            assert ragbatch_gate(result, baseline=base).passed
            assert ragbatch_gate(result.report, baseline=base, defaults=False).rules == []

        def test_a_strict_rule_fails(ragbatch_gate):
            rule = {"path": "modes.jevOnly.components.generation.groundedness.accuracy",
                    "maxDrop": 0.1}
            ragbatch_gate("regressed.json", baseline="main.json", rules=[rule], defaults=False)

        def test_missing_file(ragbatch_gate):
            ragbatch_gate("nope.json", baseline="main.json")

        def test_bad_rule(ragbatch_gate):
            ragbatch_gate("main.json", baseline="main.json", rules=[{"path": 3}])
        """
    )
    project.makepyfile(
        paths=f"FIXTURE = {str(ROOT / 'datasets' / 'rag-fixture.jsonl')!r}\n"
        f"PRICING = {str(ROOT / 'pricing' / 'typesafe-2026-12.json')!r}\n"
    )
    run = project.runpytest("-q", *NESTED_PYTEST)
    run.assert_outcomes(passed=1, failed=3)
    output = run.stdout.str()
    assert "## ragbatch gate: FAIL: regression" in output
    assert "ragbatch_gate: cannot read report nope.json: No such file or directory" in output
    assert "ragbatch_gate: rules file: 0.path:" in output
    assert "During handling" not in output and "Traceback" not in output


def test_corrected_rates_pass_fail_and_undecided(project: pytest.Pytester) -> None:
    from ragbatch.calibrate._audit import jsonl_bytes
    from tests.compare.test_inference import labelled

    (project.path / "all.jsonl").write_bytes(jsonl_bytes(labelled(1.0)))
    (project.path / "few.jsonl").write_bytes(jsonl_bytes(labelled(0.2)))
    (project.path / "fine.jsonl").write_bytes(jsonl_bytes(labelled(1.0, say=lambda _: "PASS")))
    project.makepyfile(
        test_quality="""
        def test_pass(ragbatch_gate):
            ragbatch_gate("main.json", baseline="main.json", labels="all.jsonl",
                          baseline_labels="all.jsonl")

        def test_fail(ragbatch_gate):
            ragbatch_gate("main.json", baseline="main.json", labels="all.jsonl",
                          baseline_labels="fine.jsonl")

        def test_undecided(ragbatch_gate):
            ragbatch_gate("main.json", baseline="main.json", labels="few.jsonl")

        def test_undecided_skipped(ragbatch_gate):
            ragbatch_gate("main.json", baseline="main.json", labels="few.jsonl",
                          undecided="skip")
        """
    )
    run = project.runpytest("-q", "-rs", *NESTED_PYTEST)
    run.assert_outcomes(passed=1, failed=2, skipped=1)
    output = run.stdout.str()
    assert "Corrected rates (human labels): FAIL" in output
    assert "UNDECIDED: label about " in output and "more rows to decide" in output
    assert "ragbatch gate UNDECIDED: label about" in output  # the skip reason
