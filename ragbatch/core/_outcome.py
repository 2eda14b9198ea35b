"""What happened to one row: Jev's outcome, the baseline's, and the row (pure: data only)."""

from __future__ import annotations

from dataclasses import dataclass

from ragbatch.core._claims import ClaimResult, ClaimSummary
from ragbatch.core._errors import RowFailure
from ragbatch.core._policy import Verdict
from ragbatch.core._provider import BaselineReply, Reply
from ragbatch.core._questions import Decision
from ragbatch.core._schema import Diagnosis, Judgments, Row


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

    @property
    def ok(self) -> bool:
        return self.verdict is not None

    @property
    def replies(self) -> tuple[Reply, ...]:
        """Every reply paid for on this row: the row request, then claim groups."""
        return ((self.reply,) if self.reply else ()) + self.claim_replies


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
