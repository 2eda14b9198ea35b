"""A pytest plugin (entry point ``pytest11``): gate RAG quality in a project's own test suite.

    def test_rag_quality(ragbatch_gate):
        ragbatch_gate("reports/report.json", baseline="reports/main.json")

The ``ragbatch_gate`` fixture runs ``ragbatch gate`` (the same rules, paired tests and
Markdown) on a report against a baseline, fails the test with the gate's Markdown when a rule
regressed, and returns the :class:`~ragbatch.compare._gate.GateResult` when it passed. Reports
are paths, parsed report JSON, typed :class:`~ragbatch.report._models.Report` objects or what
``ragbatch.evaluate`` returns. Loaded into every pytest run where ragbatch is installed, so
it imports nothing heavy until the fixture is used.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from ragbatch.compare import GateResult, Rule

ReportLike = str | PathLike[str] | Mapping[str, Any] | Any
LabelsLike = str | PathLike[str] | Sequence[Mapping[str, Any]]
Gate = Callable[..., "GateResult"]


def report_data(report: ReportLike, what: str) -> Mapping[str, Any]:
    """A report as parsed JSON, whatever form it was given in; pytest.fail if unreadable."""
    import orjson

    from ragbatch.report import Report, report_json

    report = getattr(report, "report", report)  # ragbatch.evaluate()'s result
    if isinstance(report, Report):
        data: Any = report_json(report)
    elif isinstance(report, str | PathLike):
        path, problem = Path(report), None
        try:
            data = orjson.loads(path.read_bytes())
        except OSError as exc:
            problem = f"cannot read {what} {path}: {exc.strerror}"
        except orjson.JSONDecodeError as exc:
            problem = f"{what} {path} is not valid JSON ({exc})"
        if problem is not None:  # failed outside the handler: no chained traceback
            pytest.fail(f"ragbatch_gate: {problem}", pytrace=False)
    else:
        data = report
    if not isinstance(data, Mapping) or "modes" not in data or "rows" not in data:
        pytest.fail(f"ragbatch_gate: the {what} is not a ragbatch report", pytrace=False)
    return data


def unjudged(data: Mapping[str, Any]) -> str | None:
    """Why a report cannot be gated: Jev judged none of its rows (every row failed, e.g. an
    offline replay that missed the cache on every row); None when some row was judged."""
    mode = (data.get("modes") or {}).get("jevOnly") or {}
    rows, failures = mode.get("rows") or 0, mode.get("failures") or {}
    if not rows or failures.get("count") != rows:
        return None
    by_kind = failures.get("byKind") or {}
    kinds = ", ".join(f"{kind} {n}" for kind, n in sorted(by_kind.items()))
    why = f"the report judged no row: all {rows} rows failed ({kinds}), so there is nothing to gate"
    if "cache-miss" in by_kind:
        why += (
            "; an offline replay found none of its replies in the cache: pass the model the "
            "cache was recorded with (model=..., the run's warning names it), or run without "
            "offline=True to record them"
        )
    return why


def run_gate(
    current: ReportLike,
    baseline: ReportLike,
    rules: Sequence[Rule | Mapping[str, Any]] | str | PathLike[str] = (),
    *,
    defaults: bool = True,
    alpha: float = 0.05,
    labels: LabelsLike | None = None,
    baseline_labels: LabelsLike | None = None,
    max_rise: float = 0.02,
    undecided: str = "fail",
) -> GateResult:
    """``ragbatch gate CURRENT --baseline BASELINE [--labels ...]``; the test fails on a
    regression. With ``labels`` the corrected rates are gated too: FAIL fails the test, and
    UNDECIDED (with "label about N more rows to decide") fails it too, or skips it with
    ``undecided="skip"``."""
    import orjson

    from ragbatch.compare import Rule, gate, gate_markdown, parse_rules
    from ragbatch.core import RagbatchError

    problem = unjudged(report_data(current, "report"))
    if problem is not None:
        pytest.fail(f"ragbatch_gate: {problem}", pytrace=False)
    try:
        items: Any = (
            orjson.loads(Path(rules).read_bytes()) if isinstance(rules, str | PathLike) else rules
        )
        if isinstance(items, Mapping):  # a rules file's {"rules": [...]}
            given = parse_rules(items)
        else:
            given = [r for r in items if isinstance(r, Rule)]
            given += parse_rules([r for r in items if not isinstance(r, Rule)])
        result = gate(
            report_data(current, "report"),
            report_data(baseline, "baseline"),
            given,
            defaults=defaults,
            alpha=alpha,
        )
    except (RagbatchError, OSError, orjson.JSONDecodeError) as error:
        problem = str(error)
    if problem is not None:  # failed outside the handler: no chained traceback
        pytest.fail(f"ragbatch_gate: {problem}", pytrace=False)
    if not result.passed:
        pytest.fail(gate_markdown(result), pytrace=False)
    if labels is not None:
        corrected_check(current, baseline, labels, baseline_labels, max_rise, undecided)
    return result


def _labels(given: LabelsLike) -> list[Mapping[str, Any]]:
    from ragbatch.data import read_labels

    if isinstance(given, str | PathLike):
        return list(read_labels(Path(given)))
    return list(given)


def corrected_check(
    current: ReportLike,
    baseline: ReportLike,
    labels: LabelsLike,
    baseline_labels: LabelsLike | None,
    max_rise: float,
    undecided: str,
) -> None:
    """The gate on corrected rates (see ``ragbatch gate --labels``); pytest.fail/skip."""
    from ragbatch.compare import corrected_gate, corrected_markdown, infer, judge_failure_rates
    from ragbatch.core import RagbatchError
    from ragbatch.report import Report

    problem: str | None = None
    try:
        now = Report.model_validate(report_data(current, "report"))
        before = Report.model_validate(report_data(baseline, "baseline"))
        base = infer(before, _labels(baseline_labels)) if baseline_labels else before.inference
        result = corrected_gate(
            infer(now, _labels(labels)), base, judge_failure_rates(before), max_rise
        )
    except (RagbatchError, OSError) as error:
        problem = str(error)
    if problem is not None:  # failed outside the handler: no chained traceback
        pytest.fail(f"ragbatch_gate: {problem}", pytrace=False)
    if result.verdict == "FAIL" or (result.verdict == "UNDECIDED" and undecided != "skip"):
        pytest.fail(corrected_markdown(result), pytrace=False)
    if result.verdict == "UNDECIDED":
        pytest.skip(f"ragbatch gate UNDECIDED: label about {result.more_labels} more rows")


@pytest.fixture
def ragbatch_gate() -> Gate:
    """``ragbatch_gate(current, baseline=..., rules=(), defaults=True, alpha=0.05,
    labels=None, baseline_labels=None, max_rise=0.02, undecided="fail")``."""
    return run_gate
