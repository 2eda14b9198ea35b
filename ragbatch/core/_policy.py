"""Judgments -> diagnosis, confidence and route: the deterministic policy (pure: no I/O).

Jev answers atomic questions; this module alone turns them into a verdict, with two-sided
thresholds: ``p <= fail`` is a confident "no", ``p >= pass`` a confident "yes", and only the
open band between them is uncertain (docs/semantics.md §2).

Two routings walk the same precedence. ``showcase`` (the TypeScript showcase's, the default):
the first rule that fires wins, and only a row where no rule fired but some signal is in the
band goes to the fallback. ``guarded`` (§2a): each rule fires, is confidently ruled out, or is
undecided; the walk stops at the first rule that is not ruled out, and an undecided rule sends
the row to the fallback. So a guarded automatic diagnosis is never taken while an earlier,
higher-precedence rule could still be the truth, which is what lets a risk bound hold.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from ragbatch.core._claims import ClaimSummary
from ragbatch.core._errors import ConfigError
from ragbatch.core._schema import Diagnosis, Judgments, Route

Routing = Literal["showcase", "guarded"]
ROUTINGS: tuple[Routing, ...] = get_args(Routing)


def routing_of(name: str | None) -> Routing:
    """A routing by name (None: the default, ``showcase``); unknown names are a ConfigError."""
    if name is None or name == "showcase":
        return "showcase"
    if name == "guarded":
        return "guarded"
    raise ConfigError(f"--routing must be one of {', '.join(ROUTINGS)}, got {name!r}")


JUDGMENTS = (
    "chunkRelevance",  # the best chunk of the row
    "contextSufficiency",
    "contextConflict",
    "answerRelevance",
    "groundedness",
    "contradiction",
    "correctness",
)


def _check(fail: float, pass_: float, what: str) -> None:
    if not (0.0 <= fail < pass_ <= 1.0):
        raise ConfigError(
            f"thresholds must satisfy 0 <= fail < pass <= 1, got fail={fail} pass={pass_}{what}"
        )


@dataclass(frozen=True, slots=True)
class Thresholds:
    """Two-sided thresholds; the fixture defaults are examples, not universal values.

    ``per`` overrides (fail, pass) for single judgments, e.g. from a calibrated policy file;
    ``routing`` says how the precedence is walked (module docstring).
    """

    fail: float = 0.2
    pass_: float = 0.8
    per: tuple[tuple[str, float, float], ...] = ()
    routing: Routing = "showcase"

    # Each judgment's (fail, pass), ``per`` applied: resolved once, read by every diagnosis.
    bounds: dict[str, tuple[float, float]] = field(
        init=False, repr=False, compare=False, hash=False
    )

    def __post_init__(self) -> None:
        if self.routing not in ROUTINGS:
            raise ConfigError(f"unknown routing {self.routing!r}; use one of {list(ROUTINGS)}")
        _check(self.fail, self.pass_, "; check --fail-threshold and --pass-threshold")
        bounds = dict.fromkeys(JUDGMENTS, (self.fail, self.pass_))
        for name, fail, pass_ in self.per:
            if name not in JUDGMENTS:
                raise ConfigError(f"unknown judgment {name!r} in thresholds; known: {JUDGMENTS}")
            _check(fail, pass_, f" for {name}")
            bounds[name] = (fail, pass_)
        object.__setattr__(self, "bounds", bounds)


class DiagnosisRisk(BaseModel):
    """One automatic diagnosis of a certified policy on the labelled rows it was tested on."""

    model_config = ConfigDict(
        frozen=True, extra="forbid", alias_generator=to_camel, populate_by_name=True
    )

    diagnosis: Diagnosis
    auto_rows: int
    errors: int
    estimated_risk: float  # errors / auto_rows: an estimate, not a bound
    target: float | None = None  # its own guaranteed bound (calibrate --per-diagnosis)
    above_target: bool  # the estimate exceeds its own target, or the pooled one


class Guarantee(BaseModel):
    """What a calibrated policy guarantees, and what was observed when it was certified.

    The guarantee is ``target_risk`` itself: with probability at least ``confidence`` (over
    the labelled rows drawn), the diagnosis error rate of the rows the policy decides
    automatically is at most ``target_risk`` (and, per listed diagnosis, at most its own
    ``target``), under ``assumption``. Everything else is an estimate on the
    ``certified_on`` rows it was tested on: ``estimated_coverage`` (with its one-sided lower
    bound at ``confidence``), ``estimated_risk``, ``auto_rows``, ``errors`` and the
    per-diagnosis figures. ``method`` names the test that certified it.
    """

    model_config = ConfigDict(
        frozen=True, extra="forbid", alias_generator=to_camel, populate_by_name=True
    )

    target_risk: float
    confidence: float
    method: str
    routing: Routing
    certified_on: int
    auto_rows: int
    errors: int
    estimated_coverage: float
    coverage_lower_bound: float
    estimated_risk: float
    candidates_tested: int
    per_diagnosis: list[DiagnosisRisk]
    assumption: str


@dataclass(frozen=True, slots=True)
class Verdict:
    """A final verdict of one judge on one row."""

    diagnosis: Diagnosis
    confidence: float
    route: Route


UNCERTAIN = Verdict("JUDGE_UNCERTAIN", 0.5, "fallback")


def _need(value: float | None, name: str) -> float:
    if value is None:
        raise ValueError(f"judgment {name} missing")  # a bug: requests always ask it
    return value


def diagnose(j: Judgments, t: Thresholds, claims: ClaimSummary | None = None) -> Verdict:
    """Apply the precedence table to one row's judgments.

    In claim mode (``claims`` given) the claim verdicts take the place of the whole-answer
    groundedness: a claim veto is GENERATOR_UNGROUNDED, an uncertain claim is uncertainty,
    and the claims' confidence replaces groundedness in the PASS confidence.
    """
    r, g = j.retrieval, j.generation
    sufficiency = _need(r.sufficiency, "sufficiency")
    conflict = _need(r.conflict, "conflict")
    relevance = _need(g.relevance, "relevance")
    grounded = _need(g.groundedness, "groundedness")
    contradiction = _need(g.contradiction, "contradiction")
    correctness = g.correctness
    best_chunk = max(r.chunk_relevance.values()) if r.chunk_relevance else None
    b = t.bounds  # (fail, pass) by judgment: b[name][0] is "confidently no", [1] "yes"
    if t.routing == "guarded":
        return _guarded(
            b,
            claims,
            sufficiency,
            conflict,
            relevance,
            grounded,
            contradiction,
            correctness,
            best_chunk,
        )

    if conflict >= b["contextConflict"][1]:
        return Verdict("CONFLICTING_EVIDENCE", conflict, "auto")
    if best_chunk is None:
        return Verdict("RETRIEVAL_MISS", 1.0, "auto")
    if best_chunk <= b["chunkRelevance"][0]:
        return Verdict("RETRIEVAL_MISS", 1.0 - best_chunk, "auto")
    if sufficiency <= b["contextSufficiency"][0]:
        return Verdict("RETRIEVAL_INSUFFICIENT", 1.0 - sufficiency, "auto")
    if relevance <= b["answerRelevance"][0]:
        return Verdict("ANSWER_IRRELEVANT", 1.0 - relevance, "auto")
    contradicted = contradiction >= b["contradiction"][1]
    if claims is not None:
        if claims.answer_fails or contradicted:
            veto = claims.confidence if claims.answer_fails else 0.0
            high = contradiction if contradicted else 0.0
            return Verdict("GENERATOR_UNGROUNDED", max(veto, high), "auto")
    elif grounded <= b["groundedness"][0] or contradicted:
        return Verdict("GENERATOR_UNGROUNDED", max(1.0 - grounded, contradiction), "auto")
    if correctness is not None and correctness <= b["correctness"][0]:
        return Verdict("ANSWER_INCORRECT", 1.0 - correctness, "auto")

    support = grounded if claims is None else claims.confidence
    signals = [
        ("contextSufficiency", sufficiency),
        ("contextConflict", conflict),
        ("answerRelevance", relevance),
        ("contradiction", contradiction),
        ("chunkRelevance", best_chunk),
    ]
    if claims is None:
        signals.append(("groundedness", grounded))
    if correctness is not None:
        signals.append(("correctness", correctness))
    for name, p in signals:  # a loop, not any(): this runs for every row, six times
        fail, pass_ = b[name]
        if fail < p < pass_:
            return UNCERTAIN
    if claims is not None and claims.uncertain:
        return UNCERTAIN

    passing = [sufficiency, 1.0 - conflict, relevance, support, 1.0 - contradiction]
    if correctness is not None:
        passing.append(correctness)
    return Verdict("PASS", min(passing), "auto")


def _guarded(
    b: dict[str, tuple[float, float]],
    claims: ClaimSummary | None,
    sufficiency: float,
    conflict: float,
    relevance: float,
    grounded: float,
    contradiction: float,
    correctness: float | None,
    best_chunk: float | None,
) -> Verdict:
    """The guarded walk (docs/semantics.md §2a): stop at the first rule not confidently ruled out."""
    if conflict >= b["contextConflict"][1]:
        return Verdict("CONFLICTING_EVIDENCE", conflict, "auto")
    if not (conflict <= b["contextConflict"][0]):
        return UNCERTAIN
    if best_chunk is None:
        return Verdict("RETRIEVAL_MISS", 1.0, "auto")
    if best_chunk <= b["chunkRelevance"][0]:
        return Verdict("RETRIEVAL_MISS", 1.0 - best_chunk, "auto")
    if not (best_chunk >= b["chunkRelevance"][1]):
        return UNCERTAIN
    if sufficiency <= b["contextSufficiency"][0]:
        return Verdict("RETRIEVAL_INSUFFICIENT", 1.0 - sufficiency, "auto")
    if not (sufficiency >= b["contextSufficiency"][1]):
        return UNCERTAIN
    if relevance <= b["answerRelevance"][0]:
        return Verdict("ANSWER_IRRELEVANT", 1.0 - relevance, "auto")
    if not (relevance >= b["answerRelevance"][1]):
        return UNCERTAIN
    contradicted = contradiction >= b["contradiction"][1]
    if claims is not None:
        if claims.answer_fails or contradicted:
            veto = claims.confidence if claims.answer_fails else 0.0
            return Verdict(
                "GENERATOR_UNGROUNDED", max(veto, contradiction if contradicted else 0.0), "auto"
            )
        if claims.uncertain or not (contradiction <= b["contradiction"][0]):
            return UNCERTAIN
    else:
        if grounded <= b["groundedness"][0] or contradicted:
            return Verdict("GENERATOR_UNGROUNDED", max(1.0 - grounded, contradiction), "auto")
        if not (grounded >= b["groundedness"][1] and contradiction <= b["contradiction"][0]):
            return UNCERTAIN
    if correctness is not None:
        if correctness <= b["correctness"][0]:
            return Verdict("ANSWER_INCORRECT", 1.0 - correctness, "auto")
        if not (correctness >= b["correctness"][1]):
            return UNCERTAIN
    support = grounded if claims is None else claims.confidence
    passing = [sufficiency, 1.0 - conflict, relevance, support, 1.0 - contradiction]
    if correctness is not None:
        passing.append(correctness)
    return Verdict("PASS", min(passing), "auto")
