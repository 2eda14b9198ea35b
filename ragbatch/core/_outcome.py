"""What happened to one row or trace: Jev's outcome, the baseline's, and the row (pure: data
only)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ragbatch.core._claims import ClaimResult, ClaimSummary
from ragbatch.core._errors import RowFailure
from ragbatch.core._policy import Verdict
from ragbatch.core._provider import BaselineReply, Reply
from ragbatch.core._questions import Decision
from ragbatch.core._schema import Diagnosis, Judgments, Row
from ragbatch.core._trace import StepJudgments, Trace
from ragbatch.core._trace_policy import TraceVerdict


@dataclass(frozen=True, slots=True)
class TraceJudged:
    """A judged trace: each judged step's judgments and decision id (by step index), and the
    verdict they give (docs/semantics.md §8); a failed trace has the steps judged before the
    failing call and no verdict."""

    trace: Trace
    judgments: Mapping[int, StepJudgments]
    decisions: Mapping[int, str]
    verdict: TraceVerdict | None


@dataclass(frozen=True, slots=True)
class JevOutcome:
    """What Jev said about a row: a reply with judgments and verdict, or a failure."""

    reply: Reply | None
    judgments: Judgments | None
    verdict: Verdict | None
    failure: RowFailure | None
    latency_ms: float
    # Claim mode: one result per claim (answer order), their summary, the extra replies.
    claims: tuple[ClaimResult, ...] | None = None
    claim_summary: ClaimSummary | None = None
    claim_replies: tuple[Reply, ...] = ()
    # --context-order both: the reversed request's reply (``reply`` is the as-is one's).
    order_replies: tuple[Reply, ...] = ()
    # A trace: its judged steps (``reply`` is the first step's, ``step_replies`` the others').
    trace: TraceJudged | None = None
    step_replies: tuple[Reply, ...] = ()

    @property
    def ok(self) -> bool:
        return self.verdict is not None

    @property
    def replies(self) -> tuple[Reply, ...]:
        """Every reply paid for on this row: the row request, then claim groups (a trace:
        every judged step's, in step order)."""
        first = (self.reply,) if self.reply else ()
        return first + self.order_replies + self.claim_replies + self.step_replies


@dataclass(frozen=True, slots=True)
class BaselineOutcome:
    reply: BaselineReply | None
    failure: RowFailure | None


@dataclass(frozen=True, slots=True)
class RowOutcome:
    index: int
    row: Row
    decision: Decision
    jev: JevOutcome
    baseline: BaselineOutcome


@dataclass(frozen=True, slots=True)
class PricedCall:
    """One priced call of one leg."""

    model: str
    input_tokens: int
    output_tokens: int
    estimated: bool = False


@dataclass(frozen=True, slots=True)
class Decided:
    """One row as one mode sees it: a verdict, or a failure; its latency and its calls."""

    expected: Diagnosis | None
    diagnosis: Diagnosis | None
    confidence: float | None
    latency_ms: float
    calls: tuple[PricedCall, ...]
    failure: RowFailure | None
