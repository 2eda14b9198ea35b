"""Frozen pydantic models of the dataset rows and of normalized judgments (pure: no I/O).

Field names on the wire are camelCase exactly as documented in the README; Python code uses
the snake_case attribute names. Dataset models are strict and forbid unknown fields, so a typo
in a label (``contextSuficiency``) is an error rather than a silently missing label.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator
from pydantic.alias_generators import to_camel

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


class RetrievalJudgments(Frozen):
    chunk_relevance: dict[str, Probability] = Field(default_factory=dict)
    sufficiency: Probability | None = None
    conflict: Probability | None = None


class GenerationJudgments(Frozen):
    relevance: Probability | None = None
    groundedness: Probability | None = None
    contradiction: Probability | None = None
    correctness: Probability | None = None


class Judgments(Frozen):
    """P(true) of every atomic judgment, in the normalized shape of seed 000.

    The same shape is the row's ``mock`` block (answers the mock provider gives) and the
    ``retrieval``/``generation`` part of a row result. ``None`` means "not asked".
    """

    retrieval: RetrievalJudgments = Field(default_factory=RetrievalJudgments)
    generation: GenerationJudgments = Field(default_factory=GenerationJudgments)


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
