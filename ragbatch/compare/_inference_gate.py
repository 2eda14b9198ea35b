"""The gate on corrected rates: PASS, FAIL or UNDECIDED from human-labelled samples (pure).

For "any failure" under Jev-only and under the cascade, the rise from BASELINE to CURRENT is
estimated from both reports' corrected rates (``ragbatch infer``), with a normal interval
whose variance is the sum of the two (independent samples). The rise is a FAIL when the
whole interval lies above ``max_rise``, a PASS when it lies at or below it, and UNDECIDED
otherwise: the labels cannot tell yet, and the gate says about how many more rows to label
(both samples grown in proportion, ignoring the finite-population correction: an upper
figure). A baseline without labels counts with its judge's raw rate and no variance.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from statistics import NormalDist
from typing import Literal

from ragbatch.compare._inference import ANY_FAILURE, CASCADE, JEV_ONLY
from ragbatch.metrics import Estimate, Inference, Out

EXIT_UNDECIDED = 6  # the labels cannot decide yet (0 pass, 1 fail, 2 usage error)
DEFAULT_MAX_RISE = 0.02
Status = Literal["pass", "fail", "undecided"]
Verdict = Literal["PASS", "FAIL", "UNDECIDED"]
VERDICTS: dict[str, Verdict] = {"pass": "PASS", "fail": "FAIL", "undecided": "UNDECIDED"}


class CorrectedCheck(Out):
    name: str
    target: str
    mode: str
    baseline: float
    current: float
    rise: float
    low: float
    high: float
    max_rise: float
    status: Status
    more_labels: int | None = None
    reason: str


class CorrectedGate(Out):
    verdict: Verdict
    confidence: float
    baseline_labelled: bool
    checks: list[CorrectedCheck]
    more_labels: int | None = None

    @property
    def exit_code(self) -> int:
        """0 PASS, 1 FAIL, :data:`EXIT_UNDECIDED` UNDECIDED."""
        return {"PASS": 0, "FAIL": 1, "UNDECIDED": EXIT_UNDECIDED}[self.verdict]


def _whole(inference: Inference, mode: str) -> Estimate | None:
    for e in inference.estimates:
        if e.target == ANY_FAILURE and e.mode == mode and e.slice is None:
            return e
    return None


def _more(gap: float, z: float, current: Estimate, baseline: Estimate | None) -> int:
    """Labels to add (both samples in proportion) until the interval excludes the limit."""
    var_c = current.standard_error**2
    var_b = baseline.standard_error**2 if baseline is not None else 0.0
    labels = current.labels + (baseline.labels if baseline is not None else 0)
    room = current.rows - current.labels + (baseline.rows - baseline.labels if baseline else 0)
    if gap <= 0.0:
        return room
    k = (var_c + var_b) / (gap / z) ** 2
    return min(room, max(1, math.ceil((k - 1.0) * labels)))


def corrected_gate(
    current: Inference,
    baseline: Inference | None,
    baseline_judge_rates: dict[str, float],
    max_rise: float = DEFAULT_MAX_RISE,
) -> CorrectedGate:
    """Check "any failure" for both modes (see the module docstring).

    ``baseline_judge_rates`` (mode -> raw rate) stands in when the baseline has no labels.
    """
    z = NormalDist().inv_cdf(0.5 + current.confidence / 2)
    checks = []
    for mode, label in ((JEV_ONLY, "Jev-only"), (CASCADE, "Cascade")):
        cur = _whole(current, mode)
        base = _whole(baseline, mode) if baseline is not None else None
        if cur is None:
            continue
        before = base.estimate if base is not None else baseline_judge_rates[mode]
        se = math.hypot(cur.standard_error, base.standard_error if base is not None else 0.0)
        rise = cur.estimate - before
        low, high = rise - z * se, rise + z * se
        status: Status = "fail" if low > max_rise else "pass" if high <= max_rise else "undecided"
        more = _more(abs(max_rise - rise), z, cur, base) if status == "undecided" else None
        reason = (
            f"rise {rise:+.4f}, {current.confidence:.0%} interval [{low:+.4f}, {high:+.4f}] "
            + {"fail": "above", "pass": "at or below", "undecided": "straddles"}[status]
            + f" the limit {max_rise:g}"
            + (f"; label about {more} more rows to decide" if more is not None else "")
        )
        checks.append(
            CorrectedCheck(
                name=f"{label} any-failure rate (corrected)",
                target=ANY_FAILURE,
                mode=mode,
                baseline=before,
                current=cur.estimate,
                rise=rise,
                low=low,
                high=high,
                max_rise=max_rise,
                status=status,
                more_labels=more,
                reason=reason,
            )
        )
    statuses = {c.status for c in checks}
    verdict = "fail" if "fail" in statuses else "undecided" if "undecided" in statuses else "pass"
    needs = [c.more_labels for c in checks if c.more_labels is not None]
    return CorrectedGate(
        verdict=VERDICTS[verdict],
        confidence=current.confidence,
        baseline_labelled=baseline is not None,
        checks=checks,
        more_labels=max(needs) if needs else None,
    )


def corrected_markdown(result: CorrectedGate) -> str:
    """The corrected-rate checks as a Markdown section for the gate's PR comment."""
    lines = [f"### Corrected rates (human labels): {result.verdict}", ""]
    lines += [
        "| Check | Baseline | Current | Rise | Interval | Max rise | Result |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    lines += [
        f"| {c.name} | {c.baseline:.4f} | {c.current:.4f} | {c.rise:+.4f} | "
        f"[{c.low:+.4f}, {c.high:+.4f}] | {c.max_rise:g} | **{c.status}**: {c.reason} |"
        for c in result.checks
    ]
    if not result.baseline_labelled:
        lines += [
            "",
            "The baseline has no labels: its judge's raw rates stand in, without variance.",
        ]
    if result.more_labels is not None:
        lines += ["", f"UNDECIDED: label about {result.more_labels} more rows to decide."]
    return "\n".join(lines) + "\n"


def corrected_junit_cases(result: CorrectedGate, suite: ET.Element) -> None:
    """One JUnit test case per check: a failure on FAIL, skipped (with the labels to add) on
    UNDECIDED, so CI shows the undecided check without calling it a regression."""
    for c in result.checks:
        case = ET.SubElement(suite, "testcase", {"classname": "ragbatch.gate", "name": c.name})
        if c.status == "fail":
            ET.SubElement(case, "failure", {"message": c.reason, "type": "regression"})
        elif c.status == "undecided":
            ET.SubElement(case, "skipped", {"message": f"UNDECIDED: {c.reason}"})
        else:
            ET.SubElement(case, "system-out").text = f"pass: {c.reason}"
