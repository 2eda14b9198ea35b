"""Pure metrics: every number of the report, computed exactly from compact per-row values.

Owns classification, calibration, selective prediction and latency (``scores``), ranking,
answer checks and abstention, claim metrics, slices, the diagnostic matrix, golden-set
sections (``golden``), where multi-step traces fail (``traces``), the cascade trade-off (``tradeoff``) and prediction-powered inference
of true rates from human labels (``ppi``).

Pure (no I/O). May import ``core``.
"""

from __future__ import annotations

from ragbatch.metrics import _scores as scores
from ragbatch.metrics._answer_checks import Abstention, AnswerCheck, AnswerChecks

# The front door: what other packages use (the modules behind it are private).
from ragbatch.metrics._audit_probes import (
    DEFAULT_MAX_FLIP_RATE,
    DEFAULT_PROBE_RATE,
    MIN_PROBE_ROWS,
    JudgeAudit,
    ProbedRow,
    ProbeEntry,
    judge_audit,
    probe_entries,
    probe_sample,
    reading,
    sample_size,
    wilson,
)
from ragbatch.metrics._claims import (
    ClaimMetrics,
    ClaimMetricsAccumulator,
    ClaimRowInput,
    low_authority_support,
    supported_only_by_low_authority,
)
from ragbatch.metrics._diagnostic_matrix import BY_KEY, LAYER_ORDER, MATRIX, Finding, diagnose_names
from ragbatch.metrics._golden import (
    AUTHORITY_IDS,
    Authority,
    ChunkAgreement,
    Counterfactual,
    GoldenAccumulator,
    GoldenHealth,
    Slices,
    row_check,
    row_ranking,
)
from ragbatch.metrics._ppi import Estimate, Inference, Labelled, Population, labels_needed, ppi_rate
from ragbatch.metrics._ranking import DEFAULT_KS, RetrievalRanking, RowRanking
from ragbatch.metrics._scores import (
    Calibration,
    Classification,
    Component,
    ExactSum,
    Latency,
    Out,
    Selective,
    safe,
)
from ragbatch.metrics._slices import (
    BUILTIN_ORDER,
    TRACE_DIMENSIONS,
    has_metadata_value,
    hops_bucket,
    metadata_fields,
    slice_keys,
    turns_bucket,
)
from ragbatch.metrics._traces import (
    TraceMetrics,
    TraceMetricsAccumulator,
    first_failing_step_match,
)
from ragbatch.metrics._tradeoff import (
    CURVE,
    CURVE_NOTE,
    NOTE,
    SWEEP,
    CurvePoint,
    ModeSummary,
    RoutingCurve,
    RoutingCurves,
    Tradeoff,
    TradeoffPoint,
    point_of,
    rejudge,
)

__all__ = [
    "AUTHORITY_IDS",
    "BUILTIN_ORDER",
    "BY_KEY",
    "CURVE",
    "CURVE_NOTE",
    "DEFAULT_KS",
    "DEFAULT_MAX_FLIP_RATE",
    "DEFAULT_PROBE_RATE",
    "LAYER_ORDER",
    "MATRIX",
    "MIN_PROBE_ROWS",
    "NOTE",
    "SWEEP",
    "TRACE_DIMENSIONS",
    "Abstention",
    "AnswerCheck",
    "AnswerChecks",
    "Authority",
    "Calibration",
    "ChunkAgreement",
    "ClaimMetrics",
    "ClaimMetricsAccumulator",
    "ClaimRowInput",
    "Classification",
    "Component",
    "Counterfactual",
    "CurvePoint",
    "Estimate",
    "ExactSum",
    "Finding",
    "GoldenAccumulator",
    "GoldenHealth",
    "Inference",
    "JudgeAudit",
    "Labelled",
    "Latency",
    "ModeSummary",
    "Out",
    "Population",
    "ProbeEntry",
    "ProbedRow",
    "RetrievalRanking",
    "RoutingCurve",
    "RoutingCurves",
    "RowRanking",
    "Selective",
    "Slices",
    "TraceMetrics",
    "TraceMetricsAccumulator",
    "Tradeoff",
    "TradeoffPoint",
    "diagnose_names",
    "first_failing_step_match",
    "has_metadata_value",
    "hops_bucket",
    "judge_audit",
    "labels_needed",
    "low_authority_support",
    "metadata_fields",
    "point_of",
    "ppi_rate",
    "probe_entries",
    "probe_sample",
    "reading",
    "rejudge",
    "row_check",
    "row_ranking",
    "safe",
    "sample_size",
    "scores",
    "slice_keys",
    "supported_only_by_low_authority",
    "turns_bucket",
    "wilson",
]
