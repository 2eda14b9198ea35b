"""Baseline judges: another evaluator's final verdict per row (pure for ``recorded``).

``recorded`` reads the verdict stored in the row's ``baseline`` block. When the block records
no latency or usage, both are estimated from the size of the row (as an LLM judge reading
question, contexts and answer plus a rubric would consume) and marked as estimated.
"""

from __future__ import annotations

import math

from ragbatch.core import BaselineReply, ProviderError, Row, TokenUsage, build_state, canonical_json

RECORDED_MODEL = "recorded-baseline"
RUBRIC_TOKENS = 400
VERDICT_TOKENS = 30


class RecordedBaseline:
    """The verdict recorded in each row's ``baseline`` block."""

    name = "recorded"

    async def judge(self, row: Row) -> BaselineReply:
        block = row.baseline
        if block is None:
            raise ProviderError(f"row {row.id!r} has no baseline verdict", kind="no-baseline")
        estimated = block.usage is None or block.latency_ms is None
        tokens_in = RUBRIC_TOKENS + math.ceil(len(canonical_json(build_state(row))) / 4)
        usage = block.usage or TokenUsage(input_tokens=tokens_in, output_tokens=VERDICT_TOKENS)
        latency = block.latency_ms if block.latency_ms is not None else 600.0 + tokens_in / 4
        return BaselineReply(
            diagnosis=block.diagnosis,
            confidence=block.confidence,
            model=block.model or RECORDED_MODEL,
            latency_ms=latency,
            usage=usage,
            estimated=estimated,
        )

    async def aclose(self) -> None:
        """Nothing to release (the verdicts come from the rows)."""
        return None
