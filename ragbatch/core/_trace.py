"""A multi-step trace: one row made of ordered steps (pure: no I/O).

A trace is what an agent or an assistant did: ``user`` steps (a turn's question), ``retrieval``
steps (a hop: a query and the documents it returned), ``tool`` steps (any other call) and
``answer`` steps (what the user was told), in the order they happened. The field names are
the native JSONL's (``steps``, ``kind``, ``query``, ``contexts``, ``text``, ``name``,
``input``, ``output``); docs/semantics.md §8 says how each step is judged.

A turn is a ``user`` step and the steps after it up to the next ``user`` step. Every turn has
at least one ``answer``; a retrieval or tool step before the first ``user`` step has no
question to serve and is refused, as is a trace without steps.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from ragbatch.core._schema import (
    BaselineVerdict,
    Context,
    Diagnosis,
    Frozen,
    GenerationJudgments,
    GenerationLabels,
    NonEmptyStr,
    Probability,
    RetrievalLabels,
    Spans,
)

StepKind = Literal["user", "retrieval", "tool", "answer"]
STEP_KINDS: tuple[StepKind, ...] = ("user", "retrieval", "tool", "answer")


class HopRetrieval(Frozen):
    """A hop's retrieval judgments: each document's relevance to the turn's question
    (``chunkRelevance``) and to the hop's own query (``queryRelevance``), and whether the
    hop's documents suffice for its query and conflict (docs/semantics.md §8)."""

    chunk_relevance: dict[str, Probability] = Field(default_factory=dict)
    query_relevance: dict[str, Probability] = Field(default_factory=dict)
    sufficiency: Probability | None = None
    conflict: Probability | None = None


class StepJudgments(Frozen):
    """P(true) of a step's judgments; the same shape is a step's ``mock`` block."""

    retrieval: HopRetrieval = Field(default_factory=HopRetrieval)
    generation: GenerationJudgments = Field(default_factory=GenerationJudgments)


class StepExpected(Frozen):
    """A step's own labels; never sent to the judge."""

    diagnosis: Diagnosis | None = None
    retrieval: RetrievalLabels | None = None
    generation: GenerationLabels | None = None


class UserStep(Frozen):
    kind: Literal["user"]
    text: str
    span: NonEmptyStr | None = None


class RetrievalStep(Frozen):
    kind: Literal["retrieval"]
    query: str
    contexts: list[Context]
    span: NonEmptyStr | None = None
    expected: StepExpected | None = None
    mock: StepJudgments | None = None


class ToolStep(Frozen):
    kind: Literal["tool"]
    name: NonEmptyStr
    input: Any = None
    output: Any = None
    span: NonEmptyStr | None = None


class AnswerStep(Frozen):
    kind: Literal["answer"]
    text: str
    span: NonEmptyStr | None = None
    expected: StepExpected | None = None
    mock: StepJudgments | None = None


Step = Annotated[UserStep | RetrievalStep | ToolStep | AnswerStep, Field(discriminator="kind")]


class TraceExpected(Frozen):
    """A trace's labels: its diagnosis and the index of its first failing step (null: none
    fails). A field left out is unlabelled; ``firstFailingStep: null`` is a label."""

    diagnosis: Diagnosis | None = None
    first_failing_step: Annotated[int, Field(ge=0)] | None = None

    @property
    def labels_first_failing_step(self) -> bool:
        return "first_failing_step" in self.model_fields_set


class Trace(Frozen):
    """One multi-step interaction: a JSONL line with ``steps`` instead of question/answer."""

    id: NonEmptyStr
    steps: list[Step]
    reference_answer: str | None = None
    expected: TraceExpected | None = None
    metadata: dict[str, Any] | None = None
    trace_id: NonEmptyStr | None = None
    session_id: NonEmptyStr | None = None
    baseline: BaselineVerdict | None = None  # a verdict recorded from another judge
    spans: Spans | None = None  # the trace's root span (each step names its own)

    @model_validator(mode="after")
    def _check_steps(self) -> Trace:
        if not self.steps:
            raise ValueError("steps: a trace needs at least one step")
        if self.steps[0].kind != "user":
            raise ValueError(
                f"steps[0]: a trace starts with a user step (the question), not {self.steps[0].kind!r}"
            )
        for index, step in enumerate(self.steps):
            if isinstance(step, RetrievalStep):
                _check_hop(step, f"steps[{index}]")
        for turn in turns_of(self):
            if not turn.answers:
                raise ValueError(
                    f"steps[{turn.user}]: the turn this user step starts has no answer step"
                )
        first = self.expected.first_failing_step if self.expected else None
        if first is not None and first >= len(self.steps):
            raise ValueError(
                f"expected.firstFailingStep: {first} is not a step index "
                f"(the trace has {len(self.steps)} steps)"
            )
        return self


def _check_hop(step: RetrievalStep, where: str) -> None:
    seen: set[str] = set()
    for i, context in enumerate(step.contexts):
        if context.id in seen:
            raise ValueError(f"{where}.contexts[{i}].id: duplicate context id {context.id!r}")
        seen.add(context.id)
    blocks: list[tuple[str, dict[str, Any]]] = []
    if step.mock is not None:
        blocks += [
            ("mock.retrieval.chunkRelevance", step.mock.retrieval.chunk_relevance),
            ("mock.retrieval.queryRelevance", step.mock.retrieval.query_relevance),
        ]
    if step.expected is not None and step.expected.retrieval is not None:
        blocks.append(
            ("expected.retrieval.chunkRelevance", step.expected.retrieval.chunk_relevance)
        )
    for name, mapping in blocks:
        for key in mapping:
            if key not in seen:
                raise ValueError(f"{where}.{name}: {key!r} is not a context id of this step")


@dataclass(frozen=True, slots=True)
class Turn:
    """One turn of a trace, by step index: its user step, hops, tools and answers."""

    index: int
    user: int
    hops: tuple[int, ...]
    tools: tuple[int, ...]
    answers: tuple[int, ...]


def turns_of(trace: Trace) -> list[Turn]:
    """The trace's turns in order (a turn starts at each ``user`` step)."""
    starts = [i for i, step in enumerate(trace.steps) if step.kind == "user"]
    out: list[Turn] = []
    for n, start in enumerate(starts):
        end = starts[n + 1] if n + 1 < len(starts) else len(trace.steps)
        span = range(start + 1, end)
        kinds = [(i, trace.steps[i].kind) for i in span]
        out.append(
            Turn(
                index=n,
                user=start,
                hops=tuple(i for i, k in kinds if k == "retrieval"),
                tools=tuple(i for i, k in kinds if k == "tool"),
                answers=tuple(i for i, k in kinds if k == "answer"),
            )
        )
    return out


def count_hops(trace: Trace) -> int:
    return sum(1 for step in trace.steps if step.kind == "retrieval")
