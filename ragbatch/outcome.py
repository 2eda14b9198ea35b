"""What happened to one row: Jev's outcome, the baseline's, and the row (pure: data only)."""

from __future__ import annotations

from dataclasses import dataclass

from ragbatch.errors import RowFailure
from ragbatch.policy import Verdict
from ragbatch.providers.base import Reply
from ragbatch.providers.baseline import BaselineReply
from ragbatch.questions import Decision
from ragbatch.schema import Judgments, Row


@dataclass(frozen=True, slots=True)
class JevOutcome:
    """What Jev said about a row: a reply with judgments and verdict, or a failure."""

    reply: Reply | None
    judgments: Judgments | None
    verdict: Verdict | None
    failure: RowFailure | None
    latency_ms: float

    @property
    def ok(self) -> bool:
        return self.verdict is not None


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
