"""Thresholds from labelled data: the fit, its bounds and search, and human audit.

Owns the fit under a risk target (``fit``), Clopper-Pearson bounds and AUROC (``bounds``),
the precedence table over per-judgment thresholds (``rules``), a multi-step trace read from
its report row and diagnosed over statuses by the trace policy (``trace_row``,
``trace_plan``), the grid search and coordinate refinement (``search``, ``refine``), the
policy file (``policy_file``) and the
stratified audit sample with judge-human agreement (``audit``; a multi-step trace's line and
its first failing step's agreement: ``trace_audit``).

Pure (works on parsed reports, returns bytes). May import ``metrics`` and ``core``.
"""

from __future__ import annotations

# The front door: what other packages use (the modules behind it are private).
from ragbatch.calibrate._audit import (
    agreement,
    audit_sample,
    instructions_line,
    jsonl_bytes,
    row_texts,
    sample_header,
)
from ragbatch.calibrate._policy_file import PolicyFile, load_policy, policy_bytes, thresholds_of
from ragbatch.calibrate._summary import calibrate_targets, summary
from ragbatch.calibrate._trace_audit import trace_texts

__all__ = [
    "PolicyFile",
    "agreement",
    "audit_sample",
    "calibrate_targets",
    "instructions_line",
    "jsonl_bytes",
    "load_policy",
    "policy_bytes",
    "row_texts",
    "sample_header",
    "summary",
    "thresholds_of",
    "trace_texts",
]
