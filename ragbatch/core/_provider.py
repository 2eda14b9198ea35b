"""The provider protocol: a Jev request in, a validated reply out (pure: no I/O here).

A provider either returns a :class:`Reply` whose answers were validated against the request
(see :func:`ragbatch.core._wire.parse_reply`) or raises :class:`~ragbatch.core._errors.ProviderError`
with a ``kind``; the runner records the latter as a failed row. An error meant to stop the
whole run (a rejected key) is :class:`~ragbatch.core._errors.RunAborted`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from ragbatch.core._schema import Diagnosis, Row, TokenUsage
from ragbatch.core._trace import Trace
from ragbatch.core._wire import Answer, JevRequest


@dataclass(frozen=True, slots=True)
class Call:
    """One row's request, or one judged step's of a trace (``step``: its index). ``row`` is
    there for the mock provider only (its ``mock`` blocks): live providers send ``request``
    and nothing else. ``probe`` marks the judge audit's ``repeat`` call: it enters the cache
    key, never the bytes sent (docs/semantics.md §9)."""

    request: JevRequest
    row: Row | Trace
    step: int | None = None
    probe: str | None = None


class Reply(BaseModel):
    """A validated answer set and what it cost; stored as JSON in the cache."""

    model_config = ConfigDict(
        frozen=True, extra="forbid", alias_generator=to_camel, populate_by_name=True
    )

    model: str
    answers: dict[str, Answer]
    usage: TokenUsage
    latency_ms: Annotated[float, Field(ge=0.0, allow_inf_nan=False)]
    request_id: str | None = None
    # How this reply was obtained in this run; not stored in the cache, not in the report.
    attempts: int = Field(default=1, exclude=True)
    retries: dict[str, int] = Field(default_factory=dict, exclude=True)
    wall_ms: float = Field(default=0.0, exclude=True)
    cached: bool = Field(default=False, exclude=True)

    def probabilities(self) -> dict[str, float]:
        """P(true) of every noul answer, by question id."""
        return {k: a.noul for k, a in self.answers.items() if a.type == "noul"}


class Provider(Protocol):
    """Answers Jev requests. ``endpoint`` and ``model`` enter the cache key."""

    name: str
    model: str
    endpoint: str

    async def fetch_answers(self, call: Call) -> Reply:
        """Answer one request or raise ProviderError (a failed row) / RunAborted (stop)."""
        ...

    async def aclose(self) -> None:
        """Release connections."""
        ...


class AttemptMeter(Protocol):
    """Hears of every attempt a retrying provider sends (the spending limit counts each one:
    a request that was sent may have been billed, whatever became of its reply)."""

    def begin(self, call: Call) -> float:
        """Before an attempt is sent: what it reserves; raise ProviderError to send nothing."""
        ...

    def end(self, reserved: float, reply: Reply | None, error: BaseException | None) -> None:
        """After the attempt: the reply it got, or the error it ended in."""
        ...


@runtime_checkable
class MeteredProvider(Protocol):
    """A provider that retries inside itself and reports each attempt to ``meter``."""

    meter: AttemptMeter | None


@dataclass(frozen=True, slots=True)
class BaselineReply:
    diagnosis: Diagnosis
    confidence: float
    model: str
    latency_ms: float
    usage: TokenUsage
    estimated: bool


class BaselineJudge(Protocol):
    name: str

    async def judge(self, row: Row) -> BaselineReply:
        """A verdict for the row, or raise ProviderError (a failed baseline row)."""
        ...

    async def aclose(self) -> None:
        """Release connections."""
        ...


def innermost(provider: Provider) -> Provider:
    """The provider at the end of a chain of wrappers (a wrapper names what it wraps
    ``inner``: the cache, the cost limit), where the live client keeps its rate limiter."""
    found = provider
    while (inner := getattr(found, "inner", None)) is not None:
        found = inner
    return found
