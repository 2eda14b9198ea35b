"""The mock provider: answers from each row's ``mock`` block, fully offline (pure, no I/O).

It goes through the same validation as a live reply and reports a deterministic latency and
token usage derived from the request size, so offline reports show realistic cost and latency
figures that never change between runs. A row whose block lacks an asked answer fails (kind
``mock-missing-answer``); the run goes on.
"""

from __future__ import annotations

import orjson

from ragbatch.core import (
    Call,
    ProviderError,
    Reply,
    TokenUsage,
    estimate_input_tokens,
    mock_answer,
    parse_reply,
)

MOCK_MODEL = "mock-jev"


def mock_latency_ms(input_tokens: int, questions: int) -> float:
    """A deterministic stand-in for service latency: ~200 ms, growing slowly with size."""
    return float(200 + 2 * questions + input_tokens // 50)


class MockProvider:
    """Provider protocol over the rows' ``mock`` blocks."""

    name = "mock"
    endpoint = "mock"

    def __init__(self, model: str = MOCK_MODEL) -> None:
        self.model = model

    async def fetch_answers(self, call: Call) -> Reply:
        answers: dict[str, object] = {}
        for qid in call.request.questions:
            answer = mock_answer(call.row, qid)
            if answer is None:
                raise ProviderError(
                    f"mock block of row {call.row.id!r} has no answer for question {qid!r}",
                    kind="mock-missing-answer",
                )
            answers[qid] = answer
        tokens_in = estimate_input_tokens(call.request)
        tokens_out = 2 * len(answers)
        body = orjson.dumps(
            {
                "model": self.model,
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
