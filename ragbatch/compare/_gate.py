"""Two reports side by side: the CI gate and the diff (pure: no I/O, works on parsed JSON).

The gate compares CURRENT with BASELINE metric by metric. A rule fails when its metric got
worse by more than ``maxDrop`` (absolute; "worse" is lower for higher-is-better metrics and
higher for lower-is-better ones). Before a failing rule counts as a regression, the per-row
outcomes of both reports (``rows[]`` matched by ``id``) go through a paired test, see
:data:`PAIRED_TEST` (a template on alpha), so that a couple of flipped rows on a small set is reported as noise.
A rule whose metric is absent from one report is skipped, and says so; so is a default rule
whose section neither report has (Recall@10 without a golden set). A given rule whose path is in
neither report is a usage error naming the nearest existing paths: a typo must not disable a check.

``diff_reports`` (defined in :mod:`ragbatch.compare._diff`, re-exported here) lists what changed
between two runs: diagnosis flips, rows added or removed, metric deltas, model and pricing.
"""

from __future__ import annotations

import difflib
import math
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, TypeAdapter, ValidationError
from pydantic.alias_generators import to_camel

from ragbatch.compare._audit_gate import AuditGate, audit_junit_cases
from ragbatch.compare._diff import Diff as Diff  # the diff is part of this module's API too
from ragbatch.compare._diff import (
    ReportData,
    as_json,
    as_number,
    fmt,
    get_path,
    markdown_table,
    rows_by_id,
)
from ragbatch.compare._diff import diff_markdown as diff_markdown
from ragbatch.compare._diff import diff_reports as diff_reports
from ragbatch.compare._inference_gate import CorrectedGate, corrected_junit_cases
from ragbatch.core import ConfigError
from ragbatch.metrics import Out, diagnose_names

Direction = Literal["higher-is-better", "lower-is-better"]
Status = Literal["pass", "fail", "not-significant", "skipped"]
Test = Literal["mcnemar-exact", "sign-test-exact", "none"]
ALPHA = 0.05
EPSILON = 1e-9  # a drop of exactly maxDrop passes despite float noise (0.75 - 0.73 > 0.02)
DIAGNOSIS = "diagnosis"  # row outcome "diagnosis == expected", for accuracy-like rules
CASCADE_DIAGNOSIS = "cascade.diagnosis"  # the same for the cascade's verdict
DIAGNOSES = (DIAGNOSIS, CASCADE_DIAGNOSIS)
FIRST_FAILING_STEP_MATCH = "firstFailingStepMatch"  # a trace's, docs/semantics.md §8a
NEAREST = 3  # nearest existing paths named for a rule path in neither report
PAIRED_TEST = (
    "A metric drop beyond its limit is a regression only when the per-row outcomes agree: "
    "rows present in both reports are paired by id, and an exact two-sided binomial test on "
    "the rows that changed (McNemar's exact test for pass/fail outcomes, the sign test for "
    "graded ones) must give p < {alpha} with more rows worse than better. Without paired "
    "outcomes the drop alone decides."
)


class Rule(Out):
    """One gate rule; ``row_path`` names the per-row outcome inside ``rows[]`` (or none)."""

    model_config = ConfigDict(
        frozen=True, alias_generator=to_camel, populate_by_name=True, extra="forbid", strict=True
    )

    name: str = ""
    path: str
    max_drop: Annotated[float, Field(ge=0.0, allow_inf_nan=False)]
    direction: Direction = "higher-is-better"
    row_path: str | None = None


_RULES = TypeAdapter(list[Rule])
DEFAULT_RULES: tuple[Rule, ...] = (
    Rule(
        name="Jev-only accuracy",
        path="modes.jevOnly.classification.accuracy",
        max_drop=0.02,
        row_path=DIAGNOSIS,
    ),
    Rule(
        name="Cascade accuracy",
        path="modes.cascade.classification.accuracy",
        max_drop=0.02,
        row_path=CASCADE_DIAGNOSIS,
    ),
    Rule(
        name="Fallback rate",
        path="modes.cascade.fallbackRate",
        max_drop=0.05,
        direction="lower-is-better",
        row_path="route=fallback",
    ),
    Rule(
        name="Failure rate",
        path="modes.jevOnly.failures.rate",
        max_drop=0.02,
        direction="lower-is-better",
        row_path="status=failed",
    ),
    Rule(
        name="Recall@10",
        path="retrievalRanking.at.10.recall",
        max_drop=0.02,
        row_path="retrievalRanking.at.10.recall",
    ),
    Rule(
        name="Groundedness",
        path="modes.jevOnly.components.generation.groundedness.accuracy",
        max_drop=0.02,
        row_path=DIAGNOSIS,
    ),
    Rule(
        name="Citation quality",
        path="modes.jevOnly.claims.answerLevelAccuracy",
        max_drop=0.05,
        row_path=DIAGNOSIS,
    ),
)


def default_row_path(path: str) -> str | None:
    """The per-row outcome a rule on ``path`` pairs on, when there is an obvious one."""
    if path.startswith("retrievalRanking."):
        return "retrievalRanking.reciprocalRank" if path.endswith(".mrr") else path
    if path.startswith("traces.firstFailingStepAccuracy."):  # the trace's step as labelled
        return FIRST_FAILING_STEP_MATCH
    return DIAGNOSIS if path.casefold().endswith("accuracy") else None


def parse_rules(data: Any) -> list[Rule]:
    """Rules from a parsed rules file: a list (or ``{"rules": [...]}``) of rule objects.

    Each has ``path`` and ``maxDrop``, optionally ``name`` (default: the path), ``direction``
    and ``rowPath`` (default: :func:`default_row_path`; ``"diagnosis"`` or
    ``"cascade.diagnosis"`` for "that verdict == expected", ``"FIELD=VALUE"`` for 1 when the
    row's field equals VALUE, e.g. ``route=fallback``). Raises ConfigError when malformed.
    """
    items = data.get("rules") if isinstance(data, Mapping) else data
    try:
        rules = _RULES.validate_python(items)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "top level"
        hint = "give a list of {path, maxDrop, direction} objects"
        raise ConfigError(f"rules file: {where}: {first['msg']} ({hint})") from None
    return [
        rule.model_copy(
            update={
                "name": rule.name or rule.path,
                "row_path": rule.row_path
                if "row_path" in rule.model_fields_set
                else default_row_path(rule.path),
            }
        )
        for rule in rules
    ]


class RuleResult(Out):
    """One rule's verdict, with the paired test used and its p-value (None when not run)."""

    name: str
    path: str
    direction: Direction
    max_drop: float
    status: Status
    baseline: float | None = None
    current: float | None = None
    drop: float | None = None
    test: Test = "none"
    p_value: float | None = None
    paired_rows: int = 0
    worse: int = 0
    better: int = 0
    reason: str


class RulePathError(ConfigError):
    """A rule's path is in neither report (the CLI names the rules file it came from)."""


class GateResult(Out):
    """All rule verdicts; ``passed`` is False when any rule is a ``fail``."""

    passed: bool
    alpha: float
    method: str
    rules: list[RuleResult]

    @property
    def exit_code(self) -> int:
        """0 when the gate passes, 1 on a regression (usage errors are the CLI's 2)."""
        return 0 if self.passed else 1


def row_outcomes(report: ReportData, row_path: str) -> dict[str, float]:
    """Per-row outcome by row id: 1/0 for a verdict == expected (``diagnosis``,
    ``cascade.diagnosis``) or for ``FIELD=VALUE``, else the number at row_path."""
    out: dict[str, float] = {}
    field, equals, wanted = row_path.partition("=")
    for row_id, (view, row) in rows_by_id(as_json(report)).items():
        if row_path in DIAGNOSES:
            if view.expected is not None:  # a failed row has no diagnosis: wrong
                out[row_id] = float(get_path(row, row_path) == view.expected)
            continue
        if equals:
            out[row_id] = float(str(get_path(row, field)) == wanted)
            continue
        value = get_path(row, row_path)
        number = float(value) if isinstance(value, bool) else as_number(value)
        if number is not None:
            out[row_id] = number
    return out


def _outcomes(report: Mapping[str, Any], row_path: str | None, which: str) -> dict[str, float]:
    try:
        return row_outcomes(report, row_path) if row_path else {}
    except ConfigError as error:  # a row field of the wrong type: say which report
        raise ConfigError(f"{which} report: {error}") from None


def binomial_two_sided(worse: int, better: int) -> float:
    """Exact two-sided p of ``worse`` vs ``better`` discordant pairs under p = 1/2."""
    n = worse + better
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(worse, better) + 1))
    return min(1.0, 2 * tail / (1 << n))  # exact integers, one rounding


def metric_paths(data: Any, prefix: str = "") -> list[str]:
    """Dotted paths of every number in parsed report JSON (``rows[]`` and lists left out)."""
    if not isinstance(data, Mapping):
        return [prefix] if prefix and as_number(data) is not None else []
    paths: list[str] = []
    for key, value in data.items():
        if prefix or key != "rows":
            paths += metric_paths(value, f"{prefix}.{key}" if prefix else str(key))
    return paths


def check_paths(
    rules: Sequence[Rule], current: Mapping[str, Any], baseline: Mapping[str, Any]
) -> None:
    """A ConfigError (exit 2) for the first rule whose path is in neither report, naming the
    nearest paths that exist: a typo in a rules file must not silently disable a check."""
    known: list[str] | None = None
    for rule in rules:
        if get_path(current, rule.path) is not None or get_path(baseline, rule.path) is not None:
            continue
        if known is None:
            known = sorted(set(metric_paths(current)) | set(metric_paths(baseline)))
        nearest = difflib.get_close_matches(rule.path, known, n=NEAREST, cutoff=0.6)
        hint = (
            "nearest existing paths: " + ", ".join(nearest)
            if nearest
            else "no similar path exists; check the spelling against the report JSON"
        )
        named = f" (rule {rule.name!r})" if rule.name != rule.path else ""
        raise RulePathError(f"rule path {rule.path}{named} is in neither report; {hint}")


def _check(
    rule: Rule, current: Mapping[str, Any], baseline: Mapping[str, Any], alpha: float
) -> RuleResult:
    out = RuleResult(
        name=rule.name,
        path=rule.path,
        direction=rule.direction,
        max_drop=rule.max_drop,
        status="skipped",
        reason="",
    )
    cur, base = as_number(get_path(current, rule.path)), as_number(get_path(baseline, rule.path))
    if cur is None or base is None:
        missing = " and ".join(n for n, v in (("current", cur), ("baseline", base)) if v is None)
        return out.model_copy(update={"reason": f"{rule.path} absent in {missing}"})
    drop = base - cur if rule.direction == "higher-is-better" else cur - base
    out = out.model_copy(update={"baseline": base, "current": cur, "drop": drop})
    if drop <= rule.max_drop + EPSILON:
        return out.model_copy(
            update={"status": "pass", "reason": f"drop {drop:.4g} <= {rule.max_drop:g}"}
        )
    after = _outcomes(current, rule.row_path, "current")
    before = _outcomes(baseline, rule.row_path, "baseline")
    ids = [i for i in before if i in after]
    reason = f"drop {drop:.4g} > {rule.max_drop:g}"
    if not ids:
        return out.model_copy(
            update={"status": "fail", "reason": f"{reason}; no paired per-row outcomes"}
        )
    sign = 1.0 if rule.direction == "higher-is-better" else -1.0
    worse = sum(sign * (after[i] - before[i]) < 0 for i in ids)
    better = sum(sign * (after[i] - before[i]) > 0 for i in ids)
    binary = all(v in (0.0, 1.0) for i in ids for v in (after[i], before[i]))
    p = binomial_two_sided(worse, better)
    significant = p < alpha and worse > better
    verdict = "significant" if significant else "not significant: treated as noise"
    return out.model_copy(
        update={
            "status": "fail" if significant else "not-significant",
            "test": "mcnemar-exact" if binary else "sign-test-exact",
            "p_value": p,
            "paired_rows": len(ids),
            "worse": worse,
            "better": better,
            "reason": f"{reason}; {worse} rows worse, {better} better, p = {p:.3g} ({verdict})",
        }
    )


def gate(
    current: ReportData,
    baseline: ReportData,
    rules: Sequence[Rule] = (),
    *,
    defaults: bool = True,
    alpha: float = ALPHA,
) -> GateResult:
    """Check the default rules (a given rule on the same path replaces one) and ``rules``
    on two reports, each typed (a :class:`ragbatch.report.Report`) or parsed JSON.

    Raises :class:`RulePathError` when a given rule's path is in neither report
    (:func:`check_paths`), ConfigError when a row the paired test reads has a field of the
    wrong type for the report's models.
    """
    current, baseline = as_json(current), as_json(baseline)
    check_paths(rules, current, baseline)
    given = {rule.path: rule for rule in rules}
    merged = [given.pop(r.path, r) for r in DEFAULT_RULES] if defaults else []
    merged += given.values()  # the rest, in the order given (last one per path wins)
    results = [_check(rule, current, baseline, alpha) for rule in merged]
    passed = all(r.status != "fail" for r in results)
    return GateResult(
        passed=passed, alpha=alpha, method=PAIRED_TEST.format(alpha=alpha), rules=results
    )


def _cells(r: RuleResult) -> tuple[str, ...]:
    numbers = (fmt(r.baseline), fmt(r.current), fmt(r.drop), f"{r.max_drop:g}")
    return (r.name, f"`{r.path}`", *numbers, r.test, fmt(r.p_value), f"**{r.status}**: {r.reason}")


def gate_markdown(result: GateResult) -> str:
    """The gate as a PR comment: verdict, one table row per rule, the test, where to look."""
    verdict = "PASS" if result.passed else "FAIL: regression"
    lines = [f"## ragbatch gate: {verdict}", ""]
    lines += markdown_table(
        ("Rule", "Metric", "Baseline", "Current", "Drop", "Max drop", "Test", "p", "Result"),
        (_cells(r) for r in result.rules),
    )
    lines += ["", f"Paired test: {result.method}"]
    failed = [r.path for r in result.rules if r.status == "fail"]
    findings = diagnose_names(failed)
    if findings:
        lines += ["", "### Where to look first (upstream layer first)", ""]
        lines += [
            f"- **{f.bad_metric}** ({f.layer}, `{f.metric}`): {f.root_cause}. "
            f"Look first: {f.look_first}."
            for f in findings
        ]
    return "\n".join(lines) + "\n"


def gate_junit(
    result: GateResult, corrected: CorrectedGate | None = None, audit: AuditGate | None = None
) -> str:
    """The gate as JUnit XML: one test case per rule (skipped rules are skipped), then one per
    corrected-rate check when human labels were given (UNDECIDED is skipped, with the labels
    still needed in its message), then one per judge-audit entry with ``--max-flip-rate``."""
    checks = corrected.checks if corrected is not None else []
    flips = audit.checks if audit is not None else []
    failures = (
        sum(r.status == "fail" for r in result.rules)
        + sum(c.status == "fail" for c in checks)
        + sum(f.failed for f in flips)
    )
    skipped = sum(r.status == "skipped" for r in result.rules) + sum(
        c.status == "undecided" for c in checks
    )
    tests = len(result.rules) + len(checks) + len(flips)
    counts = {"tests": str(tests), "failures": str(failures), "errors": "0"}
    root = ET.Element("testsuites", {"name": "ragbatch gate", **counts})
    suite = ET.SubElement(root, "testsuite", {"name": "ragbatch.gate", **counts})
    suite.set("skipped", str(skipped))
    for r in result.rules:
        case = ET.SubElement(suite, "testcase", {"classname": "ragbatch.gate", "name": r.name})
        if r.status == "fail":
            ET.SubElement(
                case, "failure", {"message": r.reason, "type": "regression"}
            ).text = f"{r.path}: baseline {fmt(r.baseline)}, current {fmt(r.current)}"
        elif r.status == "skipped":
            ET.SubElement(case, "skipped", {"message": r.reason})
        else:
            ET.SubElement(case, "system-out").text = f"{r.status}: {r.reason}"
    if corrected is not None:
        corrected_junit_cases(corrected, suite)
    if audit is not None:
        audit_junit_cases(audit, suite)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, "unicode") + "\n"
