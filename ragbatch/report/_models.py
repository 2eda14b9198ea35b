"""The report: its models (the contract) and its deterministic bytes (pure: no I/O).

Key order is field order; numbers are exact (orjson's shortest round-trip floats, no
rounding); absent keys mean "not applicable" (a reference-free row has no ``correctness``).
Nothing time- or machine-dependent is in here: wall-clock figures and cache hits of a run go
to the run record, so the same data and cache always give the same bytes.
"""

from __future__ import annotations

import re
from typing import Any, Literal

import orjson
from pydantic.json_schema import GenerateJsonSchema

from ragbatch.core import (
    Cost,
    Diagnosis,
    GenerationJudgments,
    Guarantee,
    HopRetrieval,
    RetrievalJudgments,
    Route,
    Spans,
    StepKind,
)
from ragbatch.metrics import (
    Abstention,
    AnswerCheck,
    AnswerChecks,
    Authority,
    Calibration,
    ChunkAgreement,
    ClaimMetrics,
    Classification,
    Component,
    Counterfactual,
    Finding,
    GoldenHealth,
    Inference,
    JudgeAudit,
    Latency,
    Out,
    RetrievalRanking,
    RoutingCurves,
    RowRanking,
    Selective,
    Slices,
    TraceMetrics,
    Tradeoff,
)

REPORT_VERSION = "1"


class DatasetInfo(Out):
    name: str
    rows: int
    labelled_rows: int
    sha256: str


class TracesInfo(Out):
    """The decisions a run's traces used: the trace's own and its judged steps'."""

    count: int
    version: str
    ids: dict[str, str]


class DecisionsInfo(Out):
    variant: str
    version: str
    ids: dict[str, str]
    rows_by_variant: dict[str, int]
    traces: TracesInfo | None = None  # runs with multi-step traces (docs/semantics.md §8)


class PolicyInfo(Out):
    name: str
    version: str | None = None  # a calibrated policy file's content hash
    fail_threshold: float
    pass_threshold: float
    per_judgment: dict[str, tuple[float, float]] | None = None  # judgment: (fail, pass)
    routing: str | None = None  # "guarded"; absent means "showcase" (the golden reports' own)
    precedence: list[str]
    guarantee: Guarantee | None = None  # a calibrated policy's held-out risk guarantee


class ProviderInfo(Out):
    name: str
    requested_model: str
    answered_by: list[str]
    baseline: str


class PricingInfo(Out):
    version: str
    effective_date: str
    currency: str
    sha256: str


class UsageTotals(Out):
    calls: int
    input_tokens: int
    output_tokens: int


class Usage(UsageTotals):
    by_model: dict[str, UsageTotals]
    estimated_calls: int = 0


class Failures(Out):
    count: int
    rate: float
    by_kind: dict[str, int]


class Mode(Out):
    rows: int
    classification: Classification
    calibration: Calibration
    selective: Selective
    latency: Latency
    usage: Usage
    cost: Cost
    failures: Failures


class RetrievalComponents(Out):
    chunk_relevance: Component
    context_sufficiency: Component
    context_conflict: Component


class GenerationComponents(Out):
    answer_relevance: Component
    groundedness: Component
    contradiction: Component
    correctness: Component


class Components(Out):
    retrieval: RetrievalComponents
    generation: GenerationComponents


class JevOnlyMode(Mode):
    routes: dict[str, int]
    components: Components
    claims: ClaimMetrics | None = None
    abstention: Abstention | None = None


class Leg(Out):
    usage: Usage
    cost: Cost


class EndToEnd(Out):
    accuracy: float
    overall_accuracy: float
    macro_f1: float
    failure_rate: float
    latency_p50_ms: float | None
    latency_p95_ms: float | None
    cost_usd: float | None
    baseline_calls: int


class CascadeMode(Mode):
    fallback_rate: float
    primary_resolved_rate: float
    primary_failure_rate: float
    legs: dict[str, Leg]
    end_to_end: EndToEnd


class Modes(Out):
    jev_only: JevOnlyMode
    baseline: Mode
    cascade: CascadeMode


class RowError(Out):
    kind: str
    message: str


class RowVerdict(Out):
    status: Literal["ok", "failed"]
    diagnosis: Diagnosis | None = None
    confidence: float | None = None
    source: Literal["jev", "baseline"] | None = None
    model: str | None = None
    error: RowError | None = None


class ClaimOut(Out):
    id: str
    start: int
    end: int
    citations: list[str]
    impact: str
    evidence: list[str]
    verdict: str
    probabilities: dict[str, float] | None = None
    confidence: float
    uncertain: bool
    veto: bool
    expected: str | None = None
    # Trace links: the claim can be followed back without its row.
    trace_id: str | None = None
    sources: list[str] | None = None  # the evidence passages' document ids
    authority: list[str] | None = None  # the evidence passages' authority (never judged)


class ClaimSummaryOut(Out):
    claims: int
    factual_claims: int
    supported: int
    coverage: float
    answer_fails: bool
    vetoed_by: list[str]
    uncertain: list[str]
    supported_only_by_low_authority: bool
    # Secondary, labelled: a mean can hide one severe claim; the veto above decides.
    mean_support_probability: float | None = None


class StepResult(Out):
    """One step of a trace's row: its kind and turn; a judged step's judgments and verdict."""

    index: int
    kind: StepKind
    turn: int
    span: str | None = None
    decision_id: str | None = None
    retrieval: HopRetrieval | None = None
    generation: GenerationJudgments | None = None
    diagnosis: Diagnosis | None = None
    confidence: float | None = None
    recovered: bool | None = None  # a failed hop another hop of its turn made good
    no_retrieval: bool | None = None  # an answer with no retrieval before it in its turn
    expected: Diagnosis | None = None


class RowResult(Out):
    id: str
    decision_id: str
    decision_version: str
    decision_variant: str
    status: Literal["ok", "failed"]
    error: RowError | None = None
    retrieval: RetrievalJudgments | None = None
    generation: GenerationJudgments | None = None
    diagnosis: Diagnosis | None = None
    confidence: float | None = None
    route: Route
    model: str | None = None
    latency_ms: float
    usage: UsageTotals | None = None
    expected: Diagnosis | None = None
    baseline: RowVerdict
    cascade: RowVerdict
    claims: list[ClaimOut] | None = None
    claim_summary: ClaimSummaryOut | None = None
    retrieval_ranking: RowRanking | None = None
    answer_check: AnswerCheck | None = None
    trace_id: str | None = None
    spans: Spans | None = None  # the trace's span ids the row was read from (trace exports)
    # Basic mode: the answer is judged grounded but every relevant passage has low authority.
    low_authority_support: bool | None = None
    query_tokens: int | None = None  # whitespace tokens of the question (drift, slices)
    metadata: dict[str, Any] | None = None
    # A trace (docs/semantics.md §8): the step its verdict is about, the first failing step
    # (null for PASS and JUDGE_UNCERTAIN: see row_json), its hops, turns and wasted hops, and
    # every step; the fields above then describe the deciding turn seen as a row.
    deciding_step: int | None = None
    first_failing_step: int | None = None
    # firstFailingStep agrees with expected.firstFailingStep (a trace that labels it, §8a)
    first_failing_step_match: bool | None = None
    hops: int | None = None
    turns: int | None = None
    wasted_hops: int | None = None
    steps: list[StepResult] | None = None


class Incomplete(Out):
    """The run stopped early; these rows were not evaluated (rerun to resume from the cache)."""

    reason: str
    rows_not_evaluated: int
    first_ids: list[str]


class RowsOmitted(Out):
    rows: int
    limit: int | None
    reason: str


class WatchWindow(Out):
    """The traffic a rolling report of ``ragbatch watch`` covers: the traces that started in
    [start, end) (UTC), and what became of them (docs/guides/continuous-evaluation.md)."""

    source: str  # "phoenix URL project NAME"
    start: str
    end: str
    traces: int  # seen in the window
    judged: int  # the report's rows
    sampled_out: int  # left out by --sample-rate
    unreadable: int  # spans that make no row or trace (the watcher's log names them)


class Report(Out):
    report_version: str
    window: WatchWindow | None = None  # a rolling report of ragbatch watch
    incomplete: Incomplete | None = None
    dataset: DatasetInfo
    decisions: DecisionsInfo
    policy: PolicyInfo
    provider: ProviderInfo
    pricing: PricingInfo
    modes: Modes
    tradeoff: Tradeoff | None = None
    routing_curves: RoutingCurves | None = None  # runs with a policy or guarded routing
    traces: TraceMetrics | None = None  # runs with multi-step traces (docs/semantics.md §8a)
    retrieval_ranking: RetrievalRanking | None = None
    answer_checks: AnswerChecks | None = None
    chunk_agreement: dict[str, ChunkAgreement] | None = None
    golden_health: GoldenHealth | None = None
    slices: Slices | None = None
    diagnostics: list[Finding] | None = None
    counterfactual: Counterfactual | None = None
    authority: Authority | None = None
    inference: Inference | None = None  # only after `ragbatch infer` (human labels given)
    judge_audit: JudgeAudit | None = None  # --probe, `ragbatch probe` (docs/semantics.md §9)
    rows_omitted: RowsOmitted | None = None
    rows: list[RowResult]


def report_json(report: Report) -> dict[str, Any]:
    """The report as the parsed JSON of its file (camelCase keys, absent fields left out):
    what JSON paths such as a gate rule's address."""
    data = report.model_dump(mode="json", by_alias=True, exclude_none=True)
    data["rows"] = [row_json(row) for row in data["rows"]]
    return data


def row_json(row: dict[str, Any]) -> dict[str, Any]:
    """A row's JSON as dumped without nulls, but a trace's ``firstFailingStep`` kept as null
    (no step failed): the one null a report holds, so a reader can tell it from a row. A
    failed trace has no verdict, so no first failing step either, not even null."""
    if "steps" not in row or "firstFailingStep" in row or "diagnosis" not in row:
        return row
    out: dict[str, Any] = {}
    for key, value in row.items():
        if key in ("firstFailingStepMatch", "hops") and "firstFailingStep" not in out:
            out["firstFailingStep"] = None
        out[key] = value
    return out


def report_bytes(report: Report) -> bytes:
    """The report as deterministic, diffable JSON: 2-space indent, trailing newline."""
    return orjson.dumps(report_json(report), option=orjson.OPT_INDENT_2) + b"\n"


class PublicNames(GenerateJsonSchema):
    """Names two same-named models by their package, not by the private module behind it."""

    def normalize_name(self, name: str) -> str:
        return super().normalize_name(re.sub(r"\._(?=[a-z])", ".", name))


def report_schema() -> bytes:
    """JSON Schema of the report, generated from the models (committed as a contract)."""
    schema = Report.model_json_schema(
        by_alias=True, mode="serialization", schema_generator=PublicNames
    )
    return orjson.dumps(schema, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n"
