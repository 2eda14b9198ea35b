"""Guarded routing (docs/semantics.md §2a): every rule fires, is ruled out, or stops the walk."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragbatch.calibrate._rules import DECIDE, signals_of, statuses, uniform
from ragbatch.core._claims import ClaimSummary
from ragbatch.core._errors import ConfigError
from ragbatch.core._policy import Thresholds, diagnose, routing_of
from tests.core.test_policy import check, judgments

GUARDED = Thresholds(routing="guarded")
SHOWCASE = Thresholds()


def test_all_good_is_pass() -> None:
    check(diagnose(judgments(), GUARDED), "PASS", 0.95)


# Each rule alone: the firing rules give what the showcase gives, a band stops the walk.
SIGNALS = ("conflict", "sufficiency", "relevance", "groundedness", "contradiction", "correctness")
BANDS: list[tuple[str, dict[str, float | None], str, float]] = [
    (f"{name}-band", {name: 0.5}, "JUDGE_UNCERTAIN", 0.5) for name in SIGNALS
]
ALONE: list[tuple[str, dict[str, float | None], str, float]] = [
    ("conflict-high", {"conflict": 0.9}, "CONFLICTING_EVIDENCE", 0.9),
    ("sufficiency-low", {"sufficiency": 0.1}, "RETRIEVAL_INSUFFICIENT", 1.0 - 0.1),
    ("relevance-low", {"relevance": 0.15}, "ANSWER_IRRELEVANT", 1.0 - 0.15),
    ("groundedness-low", {"groundedness": 0.1}, "GENERATOR_UNGROUNDED", 1.0 - 0.1),
    ("contradiction-high", {"contradiction": 0.85}, "GENERATOR_UNGROUNDED", 0.85),
    ("correctness-low", {"correctness": 0.05}, "ANSWER_INCORRECT", 1.0 - 0.05),
    ("correctness-absent", {"correctness": None}, "PASS", 0.95),
    *BANDS,
]


@pytest.mark.parametrize(
    ("overrides", "diagnosis", "confidence"), [r[1:] for r in ALONE], ids=[r[0] for r in ALONE]
)
def test_each_rule_alone(
    overrides: dict[str, float | None], diagnosis: str, confidence: float
) -> None:
    check(diagnose(judgments(overrides), GUARDED), diagnosis, confidence)
    check(diagnose(judgments(overrides), SHOWCASE), diagnosis, confidence)


def test_chunks() -> None:
    check(diagnose(judgments(chunks=[]), GUARDED), "RETRIEVAL_MISS", 1.0)
    check(diagnose(judgments(chunks=[0.1, 0.15]), GUARDED), "RETRIEVAL_MISS", 1.0 - 0.15)
    check(diagnose(judgments(chunks=[0.1, 0.5]), GUARDED), "JUDGE_UNCERTAIN", 0.5)
    check(diagnose(judgments(chunks=[0.5, 0.9]), GUARDED), "PASS", 0.95)


# An earlier rule still undecided: the showcase decides the later one, guarded falls back.
EARLIER_UNDECIDED = [
    ("conflict band, best chunk low", {"conflict": 0.5}, [0.1], "RETRIEVAL_MISS"),
    ("conflict band, no contexts", {"conflict": 0.5}, [], "RETRIEVAL_MISS"),
    ("best chunk band, sufficiency low", {"sufficiency": 0.1}, [0.5], "RETRIEVAL_INSUFFICIENT"),
    ("sufficiency band, relevance low", {"sufficiency": 0.5, "relevance": 0.1}, None,
     "ANSWER_IRRELEVANT"),
    ("relevance band, groundedness low", {"relevance": 0.5, "groundedness": 0.1}, None,
     "GENERATOR_UNGROUNDED"),
    ("relevance band, contradiction high", {"relevance": 0.5, "contradiction": 0.9}, None,
     "GENERATOR_UNGROUNDED"),
    ("groundedness band, correctness low", {"groundedness": 0.5, "correctness": 0.1}, None,
     "ANSWER_INCORRECT"),
    ("contradiction band, correctness low", {"contradiction": 0.5, "correctness": 0.1}, None,
     "ANSWER_INCORRECT"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("overrides", "chunks", "showcase"),
    [r[1:] for r in EARLIER_UNDECIDED],
    ids=[r[0] for r in EARLIER_UNDECIDED],
)
def test_an_undecided_earlier_rule_stops_the_walk(
    overrides: dict[str, float | None], chunks: list[float] | None, showcase: str
) -> None:
    j = judgments(overrides, chunks=chunks)
    assert diagnose(j, SHOWCASE).diagnosis == showcase
    check(diagnose(j, GUARDED), "JUDGE_UNCERTAIN", 0.5)


def test_a_later_band_does_not_stop_an_earlier_rule() -> None:
    middling = {"sufficiency": 0.5, "relevance": 0.5, "groundedness": 0.5, "correctness": 0.5}
    check(diagnose(judgments({**middling, "conflict": 0.9}), GUARDED), "CONFLICTING_EVIDENCE", 0.9)
    check(diagnose(judgments(middling, chunks=[0.1]), GUARDED), "RETRIEVAL_MISS", 0.9)


@pytest.mark.parametrize(
    ("p", "expected"),
    [(0.2, "ruled out"), (0.2000001, "band"), (0.7999999, "band"), (0.8, "fires")],
)
def test_boundaries_are_inclusive_on_both_sides(p: float, expected: str) -> None:
    # conflict at p, the best chunk low: conflict must be ruled out (p <= fail) for a miss
    verdict = diagnose(judgments({"conflict": p}, chunks=[0.1]), GUARDED)
    diagnosis = {
        "ruled out": "RETRIEVAL_MISS",
        "band": "JUDGE_UNCERTAIN",
        "fires": "CONFLICTING_EVIDENCE",
    }[expected]
    assert verdict.diagnosis == diagnosis
    # and sufficiency at p, everything else good: low fires, high rules it out
    verdict = diagnose(judgments({"sufficiency": 1.0 - p}), GUARDED)
    diagnosis = {
        "ruled out": "PASS",
        "band": "JUDGE_UNCERTAIN",
        "fires": "RETRIEVAL_INSUFFICIENT",
    }[expected]
    assert verdict.diagnosis == diagnosis


def test_per_judgment_thresholds_apply() -> None:
    t = Thresholds(routing="guarded", per=(("contextConflict", 0.6, 0.9),))
    check(diagnose(judgments({"conflict": 0.5}, chunks=[0.1]), t), "RETRIEVAL_MISS", 0.9)


# -- claim mode: a veto fires, an uncertain claim stops the walk ---------------------------------


def claims(
    *, fails: bool = False, uncertain: bool = False, confidence: float = 0.9
) -> ClaimSummary:
    return ClaimSummary(
        claims=2,
        factual_claims=2,
        supported=1 if fails else 2,
        coverage=0.5 if fails else 1.0,
        answer_fails=fails,
        vetoed_by=("c2",) if fails else (),
        uncertain=("c2",) if uncertain else (),
        confidence=confidence,
        mean_support_probability=0.9,
    )


def test_claim_mode() -> None:
    # groundedness itself is ignored in claim mode: the claims take its place
    j = judgments({"groundedness": 0.5})
    check(diagnose(j, GUARDED, claims()), "PASS", 0.9)
    check(diagnose(j, GUARDED, claims(fails=True, confidence=0.97)), "GENERATOR_UNGROUNDED", 0.97)
    check(diagnose(j, GUARDED, claims(uncertain=True)), "JUDGE_UNCERTAIN", 0.5)
    contradicted = judgments({"contradiction": 0.85})
    check(diagnose(contradicted, GUARDED, claims()), "GENERATOR_UNGROUNDED", 0.85)
    check(diagnose(judgments({"contradiction": 0.5}), GUARDED, claims()), "JUDGE_UNCERTAIN", 0.5)
    # an undecided earlier rule stops the walk before the veto
    earlier = judgments({"relevance": 0.5})
    check(diagnose(earlier, GUARDED, claims(fails=True)), "JUDGE_UNCERTAIN", 0.5)
    assert diagnose(earlier, SHOWCASE, claims(fails=True)).diagnosis == "GENERATOR_UNGROUNDED"


# -- invariants ------------------------------------------------------------------------------------

P = st.floats(0.0, 1.0, allow_nan=False)


@settings(max_examples=400, deadline=None)
@given(
    chunks=st.lists(P, max_size=3),
    values=st.lists(P, min_size=5, max_size=5),
    correctness=st.none() | P,
    fail=st.floats(0.0, 0.49),
    width=st.floats(0.01, 0.5),
)
def test_guarded_decides_only_what_the_showcase_decides_and_agrees_with_the_rules(
    chunks: list[float], values: list[float], correctness: float | None, fail: float, width: float
) -> None:
    s, c, r, g, d = values
    j = judgments(
        {"sufficiency": s, "conflict": c, "relevance": r, "groundedness": g},
        contradiction=d,
        correctness=correctness,
        chunks=chunks,
    )
    pass_ = min(1.0, fail + width)
    guarded = diagnose(j, Thresholds(fail, pass_, routing="guarded"))
    showcase = diagnose(j, Thresholds(fail, pass_))
    if guarded.route == "auto":
        assert showcase.route == "auto" and showcase.diagnosis == guarded.diagnosis
    row = j.model_dump(by_alias=True)
    st_ = statuses(signals_of(row), uniform(fail, pass_))
    assert DECIDE["guarded"](st_) == guarded.diagnosis
    assert DECIDE["showcase"](st_) == showcase.diagnosis


def test_routing_names() -> None:
    assert routing_of(None) == "showcase" and routing_of("guarded") == "guarded"
    with pytest.raises(ConfigError, match="--routing must be one of showcase, guarded"):
        routing_of("strict")
    with pytest.raises(ConfigError, match="unknown routing"):
        Thresholds(routing="strict")  # type: ignore[arg-type]
