"""Judgments -> diagnosis, confidence and route: the deterministic policy (pure: no I/O).

Jev answers atomic questions; this module alone turns them into a verdict, with two-sided
thresholds: ``p <= fail`` is a confident "no", ``p >= pass`` a confident "yes", and only the
open band between them is uncertain. The first matching rule wins (docs: rag-semantics §2).
"""

from __future__ import annotations

from dataclasses import dataclass

from ragbatch.errors import ConfigError
from ragbatch.schema import Diagnosis, Judgments, Route


@dataclass(frozen=True, slots=True)
class Thresholds:
    """Two-sided thresholds; the fixture defaults are examples, not universal values."""

    fail: float = 0.2
    pass_: float = 0.8

    def __post_init__(self) -> None:
        if not (0.0 <= self.fail < self.pass_ <= 1.0):
            raise ConfigError(
                f"thresholds must satisfy 0 <= fail < pass <= 1, got fail={self.fail} "
                f"pass={self.pass_}; check --fail-threshold and --pass-threshold"
            )

    def is_low(self, p: float) -> bool:
        return p <= self.fail

    def is_high(self, p: float) -> bool:
        return p >= self.pass_

    def is_uncertain(self, p: float) -> bool:
        return self.fail < p < self.pass_


@dataclass(frozen=True, slots=True)
class Verdict:
    """A final verdict of one judge on one row."""

    diagnosis: Diagnosis
    confidence: float
    route: Route


def _need(value: float | None, name: str) -> float:
    if value is None:
        raise ValueError(f"judgment {name} missing")  # a bug: requests always ask it
    return value


def diagnose(j: Judgments, t: Thresholds) -> Verdict:
    """Apply the precedence table to one row's judgments."""
    r, g = j.retrieval, j.generation
    sufficiency = _need(r.sufficiency, "sufficiency")
    conflict = _need(r.conflict, "conflict")
    relevance = _need(g.relevance, "relevance")
    grounded = _need(g.groundedness, "groundedness")
    contradiction = _need(g.contradiction, "contradiction")
    correctness = g.correctness
    best_chunk = max(r.chunk_relevance.values()) if r.chunk_relevance else None

    if t.is_high(conflict):
        return Verdict("CONFLICTING_EVIDENCE", conflict, "auto")
    if best_chunk is None:
        return Verdict("RETRIEVAL_MISS", 1.0, "auto")
    if t.is_low(best_chunk):
        return Verdict("RETRIEVAL_MISS", 1.0 - best_chunk, "auto")
    if t.is_low(sufficiency):
        return Verdict("RETRIEVAL_INSUFFICIENT", 1.0 - sufficiency, "auto")
    if t.is_low(relevance):
        return Verdict("ANSWER_IRRELEVANT", 1.0 - relevance, "auto")
    if t.is_low(grounded) or t.is_high(contradiction):
        return Verdict("GENERATOR_UNGROUNDED", max(1.0 - grounded, contradiction), "auto")
    if correctness is not None and t.is_low(correctness):
        return Verdict("ANSWER_INCORRECT", 1.0 - correctness, "auto")

    signals = [sufficiency, conflict, relevance, grounded, contradiction, best_chunk]
    if correctness is not None:
        signals.append(correctness)
    if any(t.is_uncertain(p) for p in signals):
        return Verdict("JUDGE_UNCERTAIN", 0.5, "fallback")

    passing = [sufficiency, 1.0 - conflict, relevance, grounded, 1.0 - contradiction]
    if correctness is not None:
        passing.append(correctness)
    return Verdict("PASS", min(passing), "auto")
