"""Judge-audit probes: a row's Jev request changed in one way the answer should not depend on
(pure: no I/O). docs/semantics.md §9 says what each probe means and what it cannot detect.

- ``order``: the retrieved contexts in reverse order, ids unchanged; every question asked again.
- ``length``: the answer padded with :data:`FILLER` (content-free) to about twice its length;
  groundedness, contradiction and answer relevance asked again.
- ``repeat``: the identical request, sent past the cache: its cache key carries the
  ``repeat`` marker (:func:`~ragbatch.core._wire.request_key`), the bytes sent do not.
- ``complement``: each judgment's yes/no question in its negated wording (:data:`NEGATED`,
  question ids prefixed ``not:``); a consistent judge answers p' = 1 - p.

The wording of the filler and of the negated twins is part of the audit's definition: change
it and bump :data:`PROBE_VERSION` (a test pins a hash of them).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Literal

from ragbatch.core._questions import (
    CHUNK_PREFIX,
    ROW_QUESTIONS,
    build_request,
    build_state,
)
from ragbatch.core._schema import Row
from ragbatch.core._wire import JevRequest, Question

PROBE_VERSION = "1.0.0"
Probe = Literal["order", "length", "repeat", "complement"]
PROBES: tuple[Probe, ...] = ("order", "length", "repeat", "complement")
NOT_PREFIX = "not:"
# The answer-side questions the length probe asks again (the others do not read the answer).
LENGTH_QUESTIONS = ("answerRelevance", "groundedness", "contradiction")
# Content-free filler: states nothing about the question or the contexts. Appended (after a
# space) as often as needed for the answer to reach twice its length.
FILLER = (
    "This response is provided for general informational purposes and reflects the "
    "information given above."
)
# Question id -> the judgment it reads (the wire names of the report's judgeAudit section).
JUDGMENT_OF: dict[str, str] = {
    "contextSufficiency": "contextSufficiency",
    "contextConflict": "contextConflict",
    "answerRelevance": "answerRelevance",
    "groundedness": "groundedness",
    "contradiction": "contradiction",
    "correctness": "correctness",
}


def _noul(instructions: str, yes: str, no: str) -> Question:
    return Question(type="noul", instructions=instructions, criteria={"true": yes, "false": no})


# The negated twin of each judgment's question: "true" here means "false" there.
NEGATED: dict[str, Question] = {
    "contextSufficiency": _noul(
        "Taken together, do the retrieved contexts lack some of the evidence needed to answer "
        "the question?",
        "Some evidence needed to answer the question is missing from the contexts",
        "The contexts as a set hold all the evidence needed to answer the question",
    ),
    "contextConflict": _noul(
        "Are the retrieved contexts free of materially conflicting information relevant to "
        "answering the question?",
        "The contexts do not disagree on anything that matters for the answer",
        "Two or more contexts disagree on something that matters for the answer",
    ),
    "answerRelevance": _noul(
        "Does the answer fail to address the question?",
        "The answer is off-topic or does not respond to what was asked",
        "The answer responds to what the question asks",
    ),
    "groundedness": _noul(
        "Does the answer state something that the retrieved contexts do not support?",
        "The answer states something the contexts do not support",
        "The contexts support the answer as a whole",
    ),
    "contradiction": _noul(
        "Is the answer free of any contradiction with the retrieved contexts?",
        "Nothing in the answer is contradicted by the contexts",
        "The answer states something the contexts contradict",
    ),
    "correctness": _noul(
        "Does the answer disagree with or omit something essential in the reference answer?",
        "The answer disagrees with or omits something essential in the reference answer",
        "The answer agrees with the reference answer on everything that matters",
    ),
}


@functools.lru_cache(maxsize=4096)
def negated_chunk_question(context_id: str) -> Question:
    """The negated twin of :func:`~ragbatch.core._questions.chunk_question`."""
    return _noul(
        f"Does the retrieved context with id {context_id!r} lack any information relevant "
        "to the question?",
        "The passage contains nothing relevant to the question",
        "The passage contains information relevant to the question",
    )


def judgment_of(question_id: str) -> str | None:
    """The judgment a question id reads (``chunkRelevance`` for every chunk), or None."""
    if question_id.startswith(CHUNK_PREFIX):
        return "chunkRelevance"
    return JUDGMENT_OF.get(question_id)


def padded(answer: str) -> str:
    """``answer`` with :data:`FILLER` appended (after a space) until it is at least twice as
    long, at least once."""
    target = 2 * len(answer)
    out = answer
    while True:
        out = f"{out} {FILLER}" if out else FILLER
        if len(out) >= target:
            return out


def _judgment_questions(row: Row) -> list[str]:
    ids = [f"{CHUNK_PREFIX}{i}" for i in range(len(row.contexts))]
    ids += list(ROW_QUESTIONS)
    if row.has_reference:
        ids.append("correctness")
    return ids


def probe_request(probe: Probe, row: Row, model: str) -> JevRequest:
    """The probe's request for one row (``repeat``: the row's request itself; its call marks
    the cache key, see :func:`~ragbatch.core._wire.request_key`)."""
    original = build_request(row, model)
    if probe == "repeat":
        return original
    if probe == "order":
        state = dict(original.state)
        state["contexts"] = list(reversed(state["contexts"]))
        return JevRequest(model=model, state=state, questions=original.questions)
    if probe == "length":
        state = build_state(row)
        state["answer"] = padded(row.answer)
        asked = {qid: original.questions[qid] for qid in LENGTH_QUESTIONS}
        return JevRequest(model=model, state=state, questions=asked)
    questions: dict[str, Question] = {}
    for qid in _judgment_questions(row):
        if qid.startswith(CHUNK_PREFIX):
            context = row.contexts[int(qid[len(CHUNK_PREFIX) :])]
            questions[NOT_PREFIX + qid] = negated_chunk_question(context.id)
        else:
            questions[NOT_PREFIX + qid] = NEGATED[qid]
    return JevRequest(model=model, state=original.state, questions=questions)


def is_probed(probe: Probe, row: Row) -> bool:
    """Whether the probe changes anything for the row: ``order`` needs two contexts or more."""
    return probe != "order" or len(row.contexts) > 1


def probe_readings(probe: Probe, answers: Mapping[str, float]) -> dict[str, float]:
    """The probe reply's P(true) by the original question id, read as the original question
    (``complement``: 1 - p' of the negated twin), judgment questions only."""
    out: dict[str, float] = {}
    for qid, p in answers.items():
        if probe == "complement":
            base = qid.removeprefix(NOT_PREFIX)
            if judgment_of(base) is not None:
                out[base] = 1.0 - p
        elif judgment_of(qid) is not None:
            out[qid] = p
    return out


def reversed_request(row: Row, model: str) -> JevRequest:
    """The row's request with the contexts in reverse order (``--context-order reversed``)."""
    return probe_request("order", row, model)
