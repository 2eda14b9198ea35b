"""A trace's judged steps -> one Jev request each, and back (pure: no I/O).

Two kinds of step are judged (docs/semantics.md §8): a retrieval hop and an answer. Each
judged step is one request whose state holds only what its questions may look at: the
conversation so far (the earlier turns' questions and final answers), the turn's question,
and the hop's query and documents, or the answer and the documents retrieved in its turn
before it. Two steps with the same state ask the same request, so the content-addressed cache
pays for them once, in whichever trace they occur. Labels, mock answers and metadata never
reach a state.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass

from ragbatch.core._questions import (
    CHUNK_PREFIX,
    CORRECTNESS_QUESTION,
    ROW_QUESTIONS,
    Decision,
    Variant,
    _noul,
    named_answers,
)
from ragbatch.core._schema import GenerationJudgments
from ragbatch.core._trace import (
    AnswerStep,
    HopRetrieval,
    RetrievalStep,
    StepJudgments,
    Trace,
    Turn,
    turns_of,
)
from ragbatch.core._wire import JevRequest, Question

TRACE_DECISION_VERSION = "1.0.0"
HOP_DECISION_ID = "ragbatch.rag-trace.hop"
ANSWER_DECISION_IDS: dict[str, str] = {
    "with-reference": "ragbatch.rag-trace.answer.with-reference",
    "without-reference": "ragbatch.rag-trace.answer.without-reference",
}
# A trace's own decision: its policy (§8) over the steps' decisions above.
TRACE_DECISION_IDS: dict[str, str] = {
    "with-reference": "ragbatch.rag-trace.with-reference",
    "without-reference": "ragbatch.rag-trace.without-reference",
}
QUERY_PREFIX = "queryRelevance:"

# The wording is part of the decision: change it and bump TRACE_DECISION_VERSION.
HOP_QUESTIONS: dict[str, Question] = {
    "contextSufficiency": _noul(
        "Taken together, do the retrieved contexts contain enough evidence to answer the "
        "search query?",
        "The contexts as a set hold all the evidence the search query asks for",
        "Some evidence the search query asks for is missing from the contexts",
    ),
    "contextConflict": _noul(
        "Do the retrieved contexts contain materially conflicting information relevant to "
        "the search query?",
        "Two or more contexts disagree on something that matters for the search query",
        "The contexts do not disagree on anything that matters for the search query",
    ),
}
ANSWER_RELEVANCE = _noul(
    "Does the answer directly address the question, read with the conversation so far?",
    "The answer responds to what the question asks, in the context of the conversation",
    "The answer is off-topic or does not respond to what was asked",
)


@functools.lru_cache(maxsize=4096)
def turn_chunk_question(context_id: str) -> Question:
    """A hop document's relevance to the turn's question, read with the conversation."""
    return _noul(
        f"Does the retrieved context with id {context_id!r} contain information relevant "
        "to the question, read with the conversation so far?",
        "The passage contains information relevant to the question",
        "The passage contains nothing relevant to the question",
    )


@functools.lru_cache(maxsize=4096)
def query_chunk_question(context_id: str) -> Question:
    """A hop document's relevance to the hop's own search query."""
    return _noul(
        f"Does the retrieved context with id {context_id!r} contain information relevant "
        "to the search query?",
        "The passage contains information relevant to the search query",
        "The passage contains nothing relevant to the search query",
    )


def trace_decision(trace: Trace) -> Decision:
    """The decision a trace records: with a reference answer (its final answer's) or without."""
    variant: Variant = (
        "with-reference" if trace.reference_answer is not None else "without-reference"
    )
    return Decision(variant, TRACE_DECISION_IDS[variant], TRACE_DECISION_VERSION)


@dataclass(frozen=True, slots=True)
class StepRequest:
    """The request of one judged step, with the decision it asks."""

    step: int
    turn: int
    request: JevRequest
    decision_id: str
    version: str = TRACE_DECISION_VERSION


def conversation_before(trace: Trace, turns: list[Turn], turn: Turn) -> list[dict[str, str]]:
    """The earlier turns as the judge sees them: each question and its last answer."""
    out = []
    for earlier in turns[: turn.index]:
        question = trace.steps[earlier.user]
        answer = trace.steps[earlier.answers[-1]]
        assert question.kind == "user" and answer.kind == "answer"
        out.append({"question": question.text, "answer": answer.text})
    return out


def evidence_before(trace: Trace, turn: Turn, step: int) -> list[dict[str, str]]:
    """The documents retrieved in ``turn`` before ``step``, each id once, first seen first."""
    seen: set[str] = set()
    out = []
    for hop in turn.hops:
        if hop > step:
            break
        retrieval = trace.steps[hop]
        assert isinstance(retrieval, RetrievalStep)
        for c in retrieval.contexts:
            if c.id not in seen:
                seen.add(c.id)
                out.append({"id": c.id, "text": c.text})
    return out


def final_answer(trace: Trace) -> int:
    """The index of the trace's last answer step (every trace has one)."""
    return max(i for i, s in enumerate(trace.steps) if s.kind == "answer")


def step_requests(trace: Trace, model: str) -> list[StepRequest]:
    """One request per judged step, in step order."""
    turns = turns_of(trace)
    last = final_answer(trace)
    out: list[StepRequest] = []
    for turn in turns:
        conversation = conversation_before(trace, turns, turn)
        question = trace.steps[turn.user]
        assert question.kind == "user"
        for index in sorted(turn.hops + turn.answers):
            step = trace.steps[index]
            if isinstance(step, RetrievalStep):
                out.append(_hop_request(step, index, turn, conversation, question.text, model))
            else:
                assert isinstance(step, AnswerStep)
                reference = trace.reference_answer if index == last else None
                state: dict[str, object] = {
                    "conversation": conversation,
                    "question": question.text,
                    "contexts": evidence_before(trace, turn, index),
                    "answer": step.text,
                }
                questions: dict[str, Question] = {
                    "answerRelevance": ANSWER_RELEVANCE,
                    "groundedness": ROW_QUESTIONS["groundedness"],
                    "contradiction": ROW_QUESTIONS["contradiction"],
                }
                variant = "without-reference"
                if reference is not None:
                    state["referenceAnswer"] = reference
                    questions["correctness"] = CORRECTNESS_QUESTION
                    variant = "with-reference"
                request = JevRequest(model=model, state=state, questions=questions)
                out.append(StepRequest(index, turn.index, request, ANSWER_DECISION_IDS[variant]))
    return out


def _hop_request(
    step: RetrievalStep,
    index: int,
    turn: Turn,
    conversation: list[dict[str, str]],
    question: str,
    model: str,
) -> StepRequest:
    state: dict[str, object] = {
        "conversation": conversation,
        "question": question,
        "query": step.query,
        "contexts": [{"id": c.id, "text": c.text} for c in step.contexts],
    }
    questions: dict[str, Question] = {}
    for i, c in enumerate(step.contexts):
        questions[f"{CHUNK_PREFIX}{i}"] = turn_chunk_question(c.id)
        questions[f"{QUERY_PREFIX}{i}"] = query_chunk_question(c.id)
    questions.update(HOP_QUESTIONS)
    request = JevRequest(model=model, state=state, questions=questions)
    return StepRequest(index, turn.index, request, HOP_DECISION_ID)


def read_step_judgments(trace: Trace, step: int, answers: Mapping[str, float]) -> StepJudgments:
    """P(true) per question id of one judged step, in the step judgments' shape."""
    item = trace.steps[step]
    if isinstance(item, RetrievalStep):
        ids = [c.id for c in item.contexts]
        return StepJudgments(
            retrieval=HopRetrieval(
                chunk_relevance={c: answers[f"{CHUNK_PREFIX}{i}"] for i, c in enumerate(ids)},
                query_relevance={c: answers[f"{QUERY_PREFIX}{i}"] for i, c in enumerate(ids)},
                sufficiency=answers["contextSufficiency"],
                conflict=answers["contextConflict"],
            )
        )
    return StepJudgments(
        generation=GenerationJudgments(
            relevance=answers["answerRelevance"],
            groundedness=answers["groundedness"],
            contradiction=answers["contradiction"],
            correctness=answers.get("correctness"),
        )
    )


def step_mock_probability(trace: Trace, step: int, question_id: str) -> float | None:
    """The step's ``mock`` block answer to one question id; None when it has none."""
    item = trace.steps[step]
    mock = item.mock if isinstance(item, RetrievalStep | AnswerStep) else None
    if mock is None:
        return None
    r, g = mock.retrieval, mock.generation
    if isinstance(item, RetrievalStep):
        for prefix in (CHUNK_PREFIX, QUERY_PREFIX):
            if question_id.startswith(prefix):
                context = item.contexts[int(question_id[len(prefix) :])].id
                # a mock without queryRelevance answers it as chunkRelevance: the hop's
                # query asked what the question asks
                chunk = r.chunk_relevance.get(context)
                return r.query_relevance.get(context, chunk) if prefix == QUERY_PREFIX else chunk
    return named_answers(r.sufficiency, r.conflict, g).get(question_id)
