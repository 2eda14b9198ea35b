"""Frozen pydantic models of the dataset rows and of normalized judgments (pure: no I/O).

Field names on the wire are camelCase exactly as documented in docs/reference/dataset-format.md; Python code uses
the snake_case attribute names. Dataset models are strict and forbid unknown fields, so a typo
in a label (``contextSuficiency``) is an error rather than a silently missing label.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator
from pydantic.alias_generators import to_camel


class Out(BaseModel):
    """Base of report sections: frozen, camelCase on output, field order = key order."""

    model_config = ConfigDict(frozen=True, alias_generator=to_camel, populate_by_name=True)


DIAGNOSES: tuple[str, ...] = (
    "PASS",
    "RETRIEVAL_MISS",
    "RETRIEVAL_INSUFFICIENT",
    "CONFLICTING_EVIDENCE",
    "GENERATOR_UNGROUNDED",
    "ANSWER_IRRELEVANT",
    "ANSWER_INCORRECT",
    "JUDGE_UNCERTAIN",
)
Diagnosis = Literal[
    "PASS",
    "RETRIEVAL_MISS",
    "RETRIEVAL_INSUFFICIENT",
    "CONFLICTING_EVIDENCE",
    "GENERATOR_UNGROUNDED",
    "ANSWER_IRRELEVANT",
    "ANSWER_INCORRECT",
    "JUDGE_UNCERTAIN",
]
Route = Literal["auto", "fallback", "failed"]
Probability = Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)]
NonEmptyStr = Annotated[str, StringConstraints(min_length=1)]


class Frozen(BaseModel):
    """Base: immutable, camelCase aliases, unknown fields rejected, no type coercion."""

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        strict=True,
        alias_generator=to_camel,
        populate_by_name=True,
    )


class Context(Frozen):
    """One retrieved passage; its position in ``Row.contexts`` is its retrieval rank."""

    id: NonEmptyStr
    text: str
    source: NonEmptyStr | None = None  # document id, e.g. "contractor-policy.pdf#page=12"
    # Authority of the source (e.g. "official", "secondary", "user-generated", or a number).
    # Reported beside support, never fed into the support judgment.
    authority: str | float | None = None


CLAIM_OPTIONS: tuple[str, ...] = ("supported", "contradicted", "insufficient", "not_applicable")
ClaimLabel = Literal["supported", "contradicted", "insufficient", "not_applicable"]
Impact = Literal["high", "normal", "low"]
Category = Literal["happy", "edge", "unanswerable"]


class Claim(Frozen):
    """One atomic claim of the answer; ``start``/``end`` are character offsets into it."""

    id: NonEmptyStr
    text: Annotated[str, StringConstraints(min_length=1)]
    start: Annotated[int, Field(ge=0)] | None = None
    end: Annotated[int, Field(ge=0)] | None = None
    citations: list[NonEmptyStr] = Field(default_factory=list)
    impact: Impact = "normal"
    metadata: dict[str, Any] | None = None


class Golden(Frozen):
    """Golden-set labels of a row (judge-independent checks); never sent to the judge."""

    expected_documents: list[NonEmptyStr] = Field(default_factory=list)
    relevance: dict[str, Annotated[int, Field(ge=0, le=3)]] = Field(default_factory=dict)
    expected_sections: list[str] = Field(default_factory=list)
    expected_answer_contains: list[str] = Field(default_factory=list)
    must_not_contain: list[str] = Field(default_factory=list)
    expected_abstention: bool | None = None
    category: Category | None = None
    expected_classification: str | None = None
    counterfactual_of: str | None = None


class RetrievalLabels(Frozen):
    chunk_relevance: dict[str, bool] = Field(default_factory=dict)
    context_sufficiency: bool | None = None
    context_conflict: bool | None = None


class GenerationLabels(Frozen):
    answer_relevance: bool | None = None
    groundedness: bool | None = None
    contradiction: bool | None = None
    correctness: bool | None = None


class Expected(Frozen):
    """Ground-truth labels; never sent to the judge."""

    diagnosis: Diagnosis | None = None
    retrieval: RetrievalLabels | None = None
    generation: GenerationLabels | None = None
    claims: dict[str, ClaimLabel] | None = None


class RetrievalJudgments(Frozen):
    chunk_relevance: dict[str, Probability] = Field(default_factory=dict)
    sufficiency: Probability | None = None
    conflict: Probability | None = None


class GenerationJudgments(Frozen):
    relevance: Probability | None = None
    groundedness: Probability | None = None
    contradiction: Probability | None = None
    correctness: Probability | None = None
    abstention: Probability | None = None


class Judgments(Frozen):
    """P(true) of every atomic judgment, in the normalized shape of docs/semantics.md §1.

    The same shape is the row's ``mock`` block (answers the mock provider gives) and the
    ``retrieval``/``generation`` part of a row result. ``None`` means "not asked".
    """

    retrieval: RetrievalJudgments = Field(default_factory=RetrievalJudgments)
    generation: GenerationJudgments = Field(default_factory=GenerationJudgments)
    # Mock only: per claim id, the probability of each support option.
    claims: dict[str, dict[ClaimLabel, Probability]] | None = None


class TokenUsage(Frozen):
    input_tokens: Annotated[int, Field(ge=0)] = 0
    output_tokens: Annotated[int, Field(ge=0)] = 0


class BaselineVerdict(Frozen):
    """A verdict recorded from another judge, optionally with what it cost."""

    diagnosis: Diagnosis
    confidence: Probability
    model: NonEmptyStr | None = None
    latency_ms: Annotated[float, Field(ge=0.0, allow_inf_nan=False)] | None = None
    usage: TokenUsage | None = None


class Spans(Frozen):
    """Ids of the trace's spans a row was read from (OpenInference spans, Langfuse
    observations), so verdicts can be written back onto them; ``None``: no such span."""

    root: NonEmptyStr | None = None
    retriever: NonEmptyStr | None = None
    llm: NonEmptyStr | None = None


class Row(Frozen):
    """One logged RAG interaction, as one JSONL line of a dataset."""

    id: NonEmptyStr
    question: str
    contexts: list[Context]
    answer: str
    reference_answer: str | None = None
    expected: Expected | None = None
    mock: Judgments | None = None
    baseline: BaselineVerdict | None = None
    metadata: dict[str, Any] | None = None
    claims: list[Claim] | None = None
    golden: Golden | None = None
    trace_id: NonEmptyStr | None = None
    spans: Spans | None = None

    @model_validator(mode="after")
    def _check_ids(self) -> Row:
        seen: set[str] = set()
        for index, context in enumerate(self.contexts):
            if context.id in seen:
                raise ValueError(f"contexts[{index}].id: duplicate context id {context.id!r}")
            seen.add(context.id)
        if self.expected and self.expected.retrieval:
            _check_keys(self.expected.retrieval.chunk_relevance, seen, "expected")
        if self.mock:
            _check_keys(self.mock.retrieval.chunk_relevance, seen, "mock")
        if self.claims:
            resolved = _resolve_claims(self.claims, self.answer, seen)
            if resolved != self.claims:
                object.__setattr__(self, "claims", resolved)  # offsets filled in once, here
        if self.reference_answer is None:
            labels = self.expected.generation if self.expected else None
            if labels is not None and labels.correctness is not None:
                raise ValueError(
                    "expected.generation.correctness: only allowed on rows with a referenceAnswer"
                )
        return self

    @property
    def has_reference(self) -> bool:
        return self.reference_answer is not None


def _check_keys(mapping: dict[str, Any], known: set[str], block: str) -> None:
    for key in mapping:
        if key not in known:
            raise ValueError(
                f"{block}.retrieval.chunkRelevance: {key!r} is not a context id of this row"
            )


def _resolve_claims(claims: list[Claim], answer: str, contexts: set[str]) -> list[Claim]:
    """Check claim ids, citations and offsets; find missing offsets in the answer."""
    ids: set[str] = set()
    out: list[Claim] = []
    for i, claim in enumerate(claims):
        where = f"claims[{i}]"
        if claim.id in ids:
            raise ValueError(f"{where}.id: duplicate claim id {claim.id!r}")
        ids.add(claim.id)
        for cited in claim.citations:
            if cited not in contexts:
                raise ValueError(f"{where}.citations: {cited!r} is not a context id of this row")
        start, end = claim.start, claim.end
        if start is None and end is None:
            start = answer.find(claim.text)
            if start < 0:
                raise ValueError(
                    f"{where}.text: not found in the answer and no start/end offsets given"
                )
            claim = claim.model_copy(update={"start": start, "end": start + len(claim.text)})
        elif start is None or end is None:
            raise ValueError(f"{where}: give both start and end, or neither")
        elif not (start < end <= len(answer)):
            raise ValueError(
                f"{where}: offsets {start}..{end} outside the answer ({len(answer)} chars)"
            )
        elif answer[start:end] != claim.text:
            raise ValueError(
                f"{where}: answer[{start}:{end}] is {answer[start:end]!r}, not the claim text"
            )
        out.append(claim)
    return out
