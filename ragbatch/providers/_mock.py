"""The mock provider: answers from each row's ``mock`` block, fully offline (pure, no I/O).

It goes through the same validation as a live reply and reports a deterministic latency and
token usage derived from the request size, so offline reports show realistic cost and latency
figures that never change between runs. A row whose block lacks an asked answer fails (kind
``mock-missing-answer``); the run goes on.

A row with no ``mock`` block at all (another tool's export, your own logs) is answered by
word overlap instead, model :data:`OVERLAP_MODEL` (the lexical baseline's coverages, see
:mod:`ragbatch.providers._lexical`): a stand-in that lets any dataset run offline end to end,
never Jev's judgment. The report names that model in ``provider.answeredBy`` and on each such
row, and ``ragbatch run`` warns about it; ``--provider jev`` judges the rows.
"""

from __future__ import annotations

import orjson

from ragbatch.core import (
    CHUNK_PREFIX,
    NOT_PREFIX,
    QUERY_PREFIX,
    Call,
    ProviderError,
    Reply,
    Row,
    TokenUsage,
    Trace,
    estimate_input_tokens,
    mock_answer,
    parse_reply,
    step_mock_probability,
)

MOCK_MODEL = "mock-jev"
OVERLAP_MODEL = "mock-word-overlap"  # a row without a mock block (not priced: not Jev)


def mock_latency_ms(input_tokens: int, questions: int) -> float:
    """A deterministic stand-in for service latency: ~200 ms, growing slowly with size."""
    return float(200 + 2 * questions + input_tokens // 50)


def overlap_answer(row: Row, question_id: str) -> dict[str, object] | None:
    """P(true) of a noul question from word overlap (None for a claim question): a context's
    relevance and sufficiency are the question's words it holds, relevance the question's words
    in the answer, groundedness the answer's words in the contexts, correctness the
    reference's words in the answer; overlap sees no conflict, contradiction or abstention."""
    from ragbatch.providers._lexical import coverage, tokens  # only for rows without a block

    question, answer = tokens(row.question), tokens(row.answer)
    contexts = [tokens(c.text) for c in row.contexts]
    if question_id.startswith(CHUNK_PREFIX):
        p = coverage(question, contexts[int(question_id.removeprefix(CHUNK_PREFIX))])
    elif question_id == "contextSufficiency":
        p = max((coverage(question, c) for c in contexts), default=0.0)
    elif question_id == "answerRelevance":
        p = coverage(question, answer)
    elif question_id == "groundedness":
        p = coverage(answer, frozenset().union(*contexts))
    elif question_id == "correctness":
        p = coverage(tokens(row.reference_answer or ""), answer)
    elif question_id in ("contextConflict", "contradiction", "abstention"):
        p = 0.0
    else:
        return None
    return {"type": "noul", "noul": round(p, 3)}


def overlap_step_answer(state: dict[str, object], question_id: str) -> dict[str, object] | None:
    """A trace step's :func:`overlap_answer`, read from the step's state: a hop's documents
    against the turn's question (``chunkRelevance``) and the hop's query (``queryRelevance``,
    ``contextSufficiency``); an answer against the question and its turn's documents."""
    from ragbatch.providers._lexical import coverage, tokens  # only for steps without a block

    question, query = tokens(str(state["question"])), tokens(str(state.get("query", "")))
    texts = state.get("contexts", [])
    assert isinstance(texts, list)
    contexts = [tokens(str(c["text"])) for c in texts]
    answer = tokens(str(state.get("answer", "")))
    if question_id.startswith(CHUNK_PREFIX):
        p = coverage(question, contexts[int(question_id.removeprefix(CHUNK_PREFIX))])
    elif question_id.startswith(QUERY_PREFIX):
        p = coverage(query, contexts[int(question_id.removeprefix(QUERY_PREFIX))])
    elif question_id == "contextSufficiency":
        p = max((coverage(query, c) for c in contexts), default=0.0)
    elif question_id == "answerRelevance":
        p = coverage(question, answer)
    elif question_id == "groundedness":
        p = coverage(answer, frozenset().union(*contexts))
    elif question_id == "correctness":
        p = coverage(tokens(str(state.get("referenceAnswer", ""))), answer)
    elif question_id in ("contextConflict", "contradiction"):
        p = 0.0
    else:
        return None
    return {"type": "noul", "noul": round(p, 3)}


def step_answer(trace: Trace, step: int, question_id: str) -> dict[str, object] | None:
    """A trace step's ``mock`` block answer in wire form; None when it has none."""
    p = step_mock_probability(trace, step, question_id)
    return None if p is None else {"type": "noul", "noul": p}


def row_answer(row: Row, question_id: str, overlap: bool) -> dict[str, object] | None:
    """A row's answer: its mock block's or word overlap's; a negated twin of the judge audit
    (``not:`` id, docs/semantics.md §9) as 1 - P(true) of the question it negates, so that
    the mock is a judge with no bias."""
    base = question_id.removeprefix(NOT_PREFIX)
    answer = overlap_answer(row, base) if overlap else mock_answer(row, base)
    if base == question_id or answer is None or answer.get("type") != "noul":
        return answer
    return {"type": "noul", "noul": 1.0 - float(answer["noul"])}  # type: ignore[arg-type]


class MockProvider:
    """Provider protocol over the rows' ``mock`` blocks (word overlap for a row without one)."""

    name = "mock"
    endpoint = "mock"

    def __init__(self, model: str = MOCK_MODEL) -> None:
        self.model = model

    async def fetch_answers(self, call: Call) -> Reply:
        answers: dict[str, object] = {}
        row, step = call.row, call.step
        if isinstance(row, Trace):
            assert step is not None, "a trace is asked one step at a time"
            overlap = getattr(row.steps[step], "mock", None) is None
        else:
            overlap = row.mock is None
        for qid in call.request.questions:
            if isinstance(row, Trace):
                answer = (
                    overlap_step_answer(call.request.state, qid)
                    if overlap
                    else step_answer(row, step, qid)  # type: ignore[arg-type]
                )
            else:
                answer = row_answer(row, qid, overlap)
            if answer is None:
                whose = f"row {row.id!r}" if step is None else f"step {step} of trace {row.id!r}"
                raise ProviderError(
                    f"mock block of {whose} has no answer for question {qid!r}",
                    kind="mock-missing-answer",
                )
            answers[qid] = answer
        tokens_in = estimate_input_tokens(call.request)
        tokens_out = 2 * len(answers)
        body = orjson.dumps(
            {
                "model": OVERLAP_MODEL if overlap else self.model,
                "answers": answers,
                "usage": {"input_tokens": tokens_in, "output_tokens": tokens_out},
            }
        )
        wire = parse_reply(call.request, body)
        return Reply(
            model=wire.model,
            answers=wire.answers,
            usage=TokenUsage(input_tokens=tokens_in, output_tokens=tokens_out),
            latency_ms=mock_latency_ms(tokens_in, len(answers)),
        )

    async def aclose(self) -> None:
        return None
