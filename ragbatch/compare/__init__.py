"""Two reports side by side (the CI gate, the diff, distribution drift), and one report
against human labels (``inference``: corrected rates; ``inference_gate``: the gate on them), and the gate on a
report's judge audit (``audit_gate``: ``--max-flip-rate``).

Pure: works on parsed report JSON or the typed report. May import ``report`` (its models),
``metrics`` and ``core``.
"""

from __future__ import annotations

# The front door: what other packages use (the modules behind it are private).
from ragbatch.compare._audit_gate import AuditGate, audit_gate, audit_gate_markdown
from ragbatch.compare._drift import distribution_drift, drift_markdown
from ragbatch.compare._gate import (
    GateResult,
    Rule,
    RulePathError,
    diff_markdown,
    diff_reports,
    gate,
    gate_junit,
    gate_markdown,
    parse_rules,
)
from ragbatch.compare._inference import JEV_ONLY, infer, judge_failure_rates
from ragbatch.compare._inference_gate import (
    DEFAULT_MAX_RISE,
    CorrectedGate,
    corrected_gate,
    corrected_markdown,
)

__all__ = [
    "DEFAULT_MAX_RISE",
    "JEV_ONLY",
    "AuditGate",
    "CorrectedGate",
    "GateResult",
    "Rule",
    "RulePathError",
    "audit_gate",
    "audit_gate_markdown",
    "corrected_gate",
    "corrected_markdown",
    "diff_markdown",
    "diff_reports",
    "distribution_drift",
    "drift_markdown",
    "gate",
    "gate_junit",
    "gate_markdown",
    "infer",
    "judge_failure_rates",
    "parse_rules",
]
