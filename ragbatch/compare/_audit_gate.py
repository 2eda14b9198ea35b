"""The gate on the judge audit: ``gate --max-flip-rate`` (pure: works on parsed report JSON).

Each entry of CURRENT's ``judgeAudit.probes`` is checked against the given maximum flip rate:
it fails when its whole 95 % interval lies above it (``flipLow > rate``). The rate is the
gate's, not the run's: the entries' own ``flagged`` used the run's ``--max-flip-rate``, which
may differ, so it is recomputed here. A report without the section is a usage error (the check
was asked for and cannot be made: run with ``--probe`` or ``ragbatch probe`` first).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping
from typing import Any

from ragbatch.core import ConfigError
from ragbatch.metrics import Out


class FlipCheck(Out):
    """One probe entry against the maximum flip rate."""

    probe: str
    judgment: str
    rows: int
    flip_rate: float
    flip_low: float
    flip_high: float
    failed: bool


class AuditGate(Out):
    """Every entry's check; the gate fails when one entry fails."""

    max_flip_rate: float
    checks: list[FlipCheck]

    @property
    def failed(self) -> list[FlipCheck]:
        """The entries whose whole flip interval lies above the maximum flip rate."""
        return [c for c in self.checks if c.failed]

    @property
    def exit_code(self) -> int:
        """0 when no entry fails, 1 otherwise (the rules gate's regression code)."""
        return 1 if self.failed else 0


def audit_gate(report: Mapping[str, Any], max_flip_rate: float) -> AuditGate:
    """Check CURRENT's judge audit (see the module docstring); raises ``ConfigError`` when the
    report has no ``judgeAudit`` section."""
    audit = report.get("judgeAudit")
    if not isinstance(audit, Mapping):
        raise ConfigError(
            "--max-flip-rate needs a report with a judgeAudit section: run with --probe "
            "order,length,repeat,complement or `ragbatch probe REPORT --dataset DATA` first"
        )
    checks = [
        FlipCheck(
            probe=e["probe"],
            judgment=e["judgment"],
            rows=e["rows"],
            flip_rate=e["flipRate"],
            flip_low=e["flipLow"],
            flip_high=e["flipHigh"],
            failed=e["flipLow"] > max_flip_rate,
        )
        for e in audit.get("probes", [])
    ]
    return AuditGate(max_flip_rate=max_flip_rate, checks=checks)


def _name(c: FlipCheck) -> str:
    return f"judge audit: {c.probe} probe, {c.judgment}"


def _reason(c: FlipCheck, limit: float) -> str:
    where = "wholly above" if c.failed else "not wholly above"
    return (
        f"flip rate {c.flip_rate:.4f} over {c.rows} rows, 95% interval [{c.flip_low:.4f}, "
        f"{c.flip_high:.4f}] {where} the maximum {limit:g}"
    )


def audit_gate_markdown(result: AuditGate) -> str:
    """The checks as a Markdown section for the gate's PR comment, failed entries named."""
    verdict = "FAIL" if result.failed else "PASS"
    lines = [f"### Judge audit (max flip rate {result.max_flip_rate:g}): {verdict}", ""]
    if not result.checks:
        return "\n".join([*lines, "The judgeAudit section has no probe entries.", ""])
    lines += ["| Probe | Judgment | Rows | Flip rate | 95% interval | Result |"]
    lines += ["| --- | --- | ---: | ---: | --- | --- |"]
    lines += [
        f"| {c.probe} | {c.judgment} | {c.rows} | {c.flip_rate:.4f} | "
        f"[{c.flip_low:.4f}, {c.flip_high:.4f}] | {'**fail**' if c.failed else 'pass'} |"
        for c in result.checks
    ]
    if result.failed:
        named = ", ".join(f"{c.probe}/{c.judgment}" for c in result.failed)
        lines += ["", f"Flip rate wholly above {result.max_flip_rate:g}: {named}."]
    return "\n".join(lines) + "\n"


def audit_junit_cases(result: AuditGate, suite: ET.Element) -> None:
    """One JUnit test case per probe entry, a failure where its flip interval is too high."""
    for c in result.checks:
        case = ET.SubElement(suite, "testcase", {"classname": "ragbatch.gate", "name": _name(c)})
        reason = _reason(c, result.max_flip_rate)
        if c.failed:
            ET.SubElement(case, "failure", {"message": reason, "type": "judge-audit"})
        else:
            ET.SubElement(case, "system-out").text = f"pass: {reason}"
