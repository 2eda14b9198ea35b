"""Row -> one Jev request holding every atomic question of the row, and back (pure: no I/O).

The state carries only what the questions may look at: the question, the retrieved contexts,
the answer and, for reference rows, the reference answer. Labels (``expected``), mock answers,
baseline verdicts and metadata never reach it.

Questions are evaluated in isolation against the same state, so asking them all in one
request is safe and pays the state and the per-call overhead once instead of once per question.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from ragbatch.core._schema import (
    CLAIM_OPTIONS,
    GenerationJudgments,
    Judgments,
    RetrievalJudgments,
    Row,
)
from ragbatch.core._wire import JevRequest, Question

DECISION_VERSION = "1.0.0"
DECISION_IDS: dict[str, str] = {
    "with-reference": "ragbatch.rag-diagnosis.with-reference",
    "without-reference": "ragbatch.rag-diagnosis.without-reference",
}
Variant = Literal["with-reference", "without-reference"]

CALL_OVERHEAD_TOKENS = 260
# The service's documented size limits (jev-api.md), compared with the estimate below.
MAX_REQUEST_TOKENS = 64_000
MAX_STATE_QUESTION_TOKENS = 32_000
CHUNK_PREFIX = "chunkRelevance:"
CLAIM_PREFIX = "claim:"


def _noul(instructions: str, yes: str, no: str) -> Question:
    return Question(type="noul", instructions=instructions, criteria={"true": yes, "false": no})


# Row-level questions, keyed by question id. The wording is part of the decision: change it
# and bump DECISION_VERSION (tests pin a hash of these definitions).
ROW_QUESTIONS: dict[str, Question] = {
    "contextSufficiency": _noul(
        "Taken together, do the retrieved contexts contain enough evidence to answer the question?",
        "The contexts as a set hold all the evidence needed to answer the question",
        "Some evidence needed to answer the question is missing from the contexts",
    ),
    "contextConflict": _noul(
        "Do the retrieved contexts contain materially conflicting information relevant to "
        "answering the question?",
        "Two or more contexts disagree on something that matters for the answer",
        "The contexts do not disagree on anything that matters for the answer",
    ),
    "answerRelevance": _noul(
        "Does the answer directly address the question?",
        "The answer responds to what the question asks",
        "The answer is off-topic or does not respond to what was asked",
    ),
    "groundedness": _noul(
        "Is every statement of the answer supported by the retrieved contexts?",
        "The contexts support the answer as a whole",
        "The answer states something the contexts do not support",
    ),
    "contradiction": _noul(
        "Does the answer contradict any of the retrieved contexts?",
        "The answer states something the contexts contradict",
        "Nothing in the answer is contradicted by the contexts",
    ),
}
ABSTENTION_QUESTION = _noul(
    "Does the answer decline to answer the question?",
    "The answer refuses, says it cannot answer, or says the information is not available",
    "The answer attempts to answer the question",
)
CORRECTNESS_QUESTION = _noul(
    "Is the answer consistent with the reference answer?",
    "The answer agrees with the reference answer on everything that matters",
    "The answer disagrees with or omits something essential in the reference answer",
)


@functools.lru_cache(maxsize=4096)
def chunk_question(context_id: str) -> Question:
    """The relevance question about one retrieved passage, named by its id."""
    return _noul(
        f"Does the retrieved context with id {context_id!r} contain information relevant "
        "to the question?",
        "The passage contains information relevant to the question",
        "The passage contains nothing relevant to the question",
    )


@dataclass(frozen=True, slots=True)
class Decision:
    """Which decision definition a row uses."""

    variant: Variant
    decision_id: str
    version: str = DECISION_VERSION


def decision_for(row: Row) -> Decision:
    variant: Variant = "with-reference" if row.has_reference else "without-reference"
    return Decision(variant=variant, decision_id=DECISION_IDS[variant])


def report_variant(variants: set[str]) -> str:
    """The report-level variant: the single variant of all rows, ``mixed`` or ``none``."""
    if not variants:
        return "none"
    return next(iter(variants)) if len(variants) == 1 else "mixed"


def build_state(row: Row) -> dict[str, object]:
    state: dict[str, object] = {
        "question": row.question,
        "contexts": [{"id": c.id, "text": c.text} for c in row.contexts],
        "answer": row.answer,
    }
    if row.reference_answer is not None:
        state["referenceAnswer"] = row.reference_answer
    return state


def build_request(row: Row, model: str) -> JevRequest:
    """Every question of the row in one request. No contexts: no chunk questions."""
    questions: dict[str, Question] = {
        f"{CHUNK_PREFIX}{i}": chunk_question(c.id) for i, c in enumerate(row.contexts)
    }
    questions.update(ROW_QUESTIONS)
    if row.has_reference:
        questions["correctness"] = CORRECTNESS_QUESTION
    if row.golden is not None and row.golden.expected_abstention is not None:
        questions["abstention"] = ABSTENTION_QUESTION
    return JevRequest(model=model, state=build_state(row), questions=questions)


def read_judgments(row: Row, answers: Mapping[str, float]) -> Judgments:
    """Map P(true) per question id back to the normalized judgment shape."""
    chunks = {c.id: answers[f"{CHUNK_PREFIX}{i}"] for i, c in enumerate(row.contexts)}
    return Judgments(
        retrieval=RetrievalJudgments(
            chunk_relevance=chunks,
            sufficiency=answers["contextSufficiency"],
            conflict=answers["contextConflict"],
        ),
        generation=GenerationJudgments(
            relevance=answers["answerRelevance"],
            groundedness=answers["groundedness"],
            contradiction=answers["contradiction"],
            correctness=answers.get("correctness"),
            abstention=answers.get("abstention"),
        ),
    )


def mock_answer(row: Row, question_id: str) -> dict[str, object] | None:
    """The row's ``mock`` block answer to one question, in wire form; None when it has none."""
    mock = row.mock
    if mock is None:
        return None
    if question_id.startswith(CLAIM_PREFIX):
        table = (mock.claims or {}).get(question_id.removeprefix(CLAIM_PREFIX))
        if table is None:
            return None
        probabilities = {o: table.get(o, 0.0) for o in CLAIM_OPTIONS}  # type: ignore[call-overload]
        top = max(CLAIM_OPTIONS, key=lambda o: (probabilities[o], -CLAIM_OPTIONS.index(o)))
        return {
            "type": "choice",
            "choice": top,
            "confidence": probabilities[top],
            "probabilities": probabilities,
        }
    p = mock_probability(mock, row, question_id)
    return None if p is None else {"type": "noul", "noul": p}


def named_answers(
    sufficiency: float | None, conflict: float | None, g: GenerationJudgments
) -> dict[str, float | None]:
    """P(true) by question id of the named (non-chunk) questions, from judgments in the
    normalized shape: what :func:`read_judgments` reads, the other way round."""
    return {
        "contextSufficiency": sufficiency,
        "contextConflict": conflict,
        "answerRelevance": g.relevance,
        "groundedness": g.groundedness,
        "contradiction": g.contradiction,
        "correctness": g.correctness,
        "abstention": g.abstention,
    }


def mock_probability(mock: Judgments, row: Row, question_id: str) -> float | None:
    """The mock block's P(true) for one noul question id."""
    if question_id.startswith(CHUNK_PREFIX):
        context = row.contexts[int(question_id[len(CHUNK_PREFIX) :])]
        return mock.retrieval.chunk_relevance.get(context.id)
    r = mock.retrieval
    return named_answers(r.sufficiency, r.conflict, mock.generation)[question_id]


def _state_tokens(request: JevRequest) -> int:
    return math.ceil(len(request.state_json) / 4)


def estimate_input_tokens(request: JevRequest) -> int:
    """Input tokens of one call: fixed overhead + state + every question (~4 bytes a token).

    The real tokenizer is not public; this estimate is used for budgets and previews only and
    is reconciled with the ``usage`` the service reports.
    """
    questions = sum(q.estimated_tokens for q in request.questions.values())
    return CALL_OVERHEAD_TOKENS + _state_tokens(request) + questions


@dataclass(frozen=True, slots=True)
class RequestLimits:
    """Size limits of one request in estimated input tokens (``--max-request-tokens``,
    ``--max-state-question-tokens``)."""

    request_tokens: int = MAX_REQUEST_TOKENS
    state_question_tokens: int = MAX_STATE_QUESTION_TOKENS


def oversize_reason(request: JevRequest, limits: RequestLimits) -> str | None:
    """Why ``request`` is over a size limit (naming the limit), or None if it fits."""
    state = _state_tokens(request)
    sizes = [q.estimated_tokens for q in request.questions.values()]
    total = CALL_OVERHEAD_TOKENS + state + sum(sizes)
    if total > limits.request_tokens:
        return (
            f"request too large: ~{total:,} input tokens estimated, over the limit of "
            f"{limits.request_tokens:,} tokens per request (--max-request-tokens); not sent"
        )
    longest = max(sizes, default=0)
    if state + longest > limits.state_question_tokens:
        return (
            f"request too large: the state and the longest question are ~{state + longest:,} "
            f"tokens estimated, over the limit of {limits.state_question_tokens:,} "
            "(--max-state-question-tokens); not sent"
        )
    return None
