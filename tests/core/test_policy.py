"""Policy: the precedence table of docs/semantics.md §2, its boundaries and its invariants."""

from __future__ import annotations

import math
from collections.abc import Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragbatch.core._errors import ConfigError
from ragbatch.core._policy import Thresholds, Verdict, diagnose
from ragbatch.core._schema import DIAGNOSES, GenerationJudgments, Judgments, RetrievalJudgments

DEFAULT = Thresholds()
# Every signal confidently on its good side, none at a boundary; PASS confidence 0.95.
GOOD: dict[str, float | None] = {
    "sufficiency": 0.95,
    "conflict": 0.05,
    "relevance": 0.95,
    "groundedness": 0.95,
    "contradiction": 0.05,
    "correctness": 0.95,
}


def judgments(
    overrides: Mapping[str, float | None] | None = None,
    /,
    *,
    chunks: list[float] | None = None,
    **more: float | None,
) -> Judgments:
    """Judgments with every signal good unless overridden; ``chunks`` default to one 0.95."""
    values = {**GOOD, **(overrides or {}), **more}
    chunk_values = [0.95] if chunks is None else chunks
    return Judgments(
        retrieval=RetrievalJudgments(
            chunk_relevance={f"c{i}": p for i, p in enumerate(chunk_values)},
            sufficiency=values["sufficiency"],
            conflict=values["conflict"],
        ),
        generation=GenerationJudgments(
            relevance=values["relevance"],
            groundedness=values["groundedness"],
            contradiction=values["contradiction"],
            correctness=values["correctness"],
        ),
    )


def check(verdict: Verdict, diagnosis: str, confidence: float) -> None:
    """Assert diagnosis, exact confidence, and the route the diagnosis implies."""
    assert verdict.diagnosis == diagnosis
    assert verdict.confidence == confidence
    assert verdict.route == ("fallback" if diagnosis == "JUDGE_UNCERTAIN" else "auto")


def test_all_good_is_pass() -> None:
    check(diagnose(judgments(), DEFAULT), "PASS", 0.95)


# -- one rule at a time ---------------------------------------------------------------------------

RULES: list[tuple[str, dict[str, float | None], str, float]] = [
    ("conflict-high", {"conflict": 0.9}, "CONFLICTING_EVIDENCE", 0.9),
    ("sufficiency-low", {"sufficiency": 0.1}, "RETRIEVAL_INSUFFICIENT", 1.0 - 0.1),
    ("relevance-low", {"relevance": 0.15}, "ANSWER_IRRELEVANT", 1.0 - 0.15),
    ("groundedness-low", {"groundedness": 0.1}, "GENERATOR_UNGROUNDED", 1.0 - 0.1),
    ("contradiction-high", {"contradiction": 0.85}, "GENERATOR_UNGROUNDED", 0.85),
    ("correctness-low", {"correctness": 0.05}, "ANSWER_INCORRECT", 1.0 - 0.05),
    ("sufficiency-band", {"sufficiency": 0.5}, "JUDGE_UNCERTAIN", 0.5),
    ("conflict-band", {"conflict": 0.5}, "JUDGE_UNCERTAIN", 0.5),
    ("relevance-band", {"relevance": 0.5}, "JUDGE_UNCERTAIN", 0.5),
    ("groundedness-band", {"groundedness": 0.5}, "JUDGE_UNCERTAIN", 0.5),
    ("contradiction-band", {"contradiction": 0.5}, "JUDGE_UNCERTAIN", 0.5),
    ("correctness-band", {"correctness": 0.5}, "JUDGE_UNCERTAIN", 0.5),
]


@pytest.mark.parametrize(
    ("overrides", "diagnosis", "confidence"),
    [r[1:] for r in RULES],
    ids=[r[0] for r in RULES],
)
def test_each_rule_alone(
    overrides: dict[str, float | None], diagnosis: str, confidence: float
) -> None:
    check(diagnose(judgments(overrides), DEFAULT), diagnosis, confidence)


def test_no_contexts_is_retrieval_miss_with_confidence_one() -> None:
    check(diagnose(judgments(chunks=[]), DEFAULT), "RETRIEVAL_MISS", 1.0)


def test_low_best_chunk_is_retrieval_miss_with_one_minus_best() -> None:
    check(diagnose(judgments(chunks=[0.1, 0.15, 0.05]), DEFAULT), "RETRIEVAL_MISS", 1.0 - 0.15)


# -- exact boundaries: p <= fail is low, p >= pass is high, the band is open ----------------------

LOW_BAD = [  # signal, diagnosis when low
    ("sufficiency", "RETRIEVAL_INSUFFICIENT"),
    ("relevance", "ANSWER_IRRELEVANT"),
    ("groundedness", "GENERATOR_UNGROUNDED"),
    ("correctness", "ANSWER_INCORRECT"),
]
HIGH_BAD = [("conflict", "CONFLICTING_EVIDENCE"), ("contradiction", "GENERATOR_UNGROUNDED")]


@pytest.mark.parametrize(("signal", "diagnosis"), LOW_BAD)
@pytest.mark.parametrize(
    ("p", "side"), [(0.2, "bad"), (0.2000001, "band"), (0.7999999, "band"), (0.8, "good")]
)
def test_low_is_bad_boundaries(signal: str, diagnosis: str, p: float, side: str) -> None:
    verdict = diagnose(judgments({signal: p}), DEFAULT)
    if side == "bad":
        check(verdict, diagnosis, 1.0 - p)  # a confident "no" is a failure, not uncertainty
    elif side == "band":
        check(verdict, "JUDGE_UNCERTAIN", 0.5)
    else:
        check(verdict, "PASS", min(0.95, p))


@pytest.mark.parametrize(("signal", "diagnosis"), HIGH_BAD)
@pytest.mark.parametrize(
    ("p", "side"), [(0.8, "bad"), (0.7999999, "band"), (0.2000001, "band"), (0.2, "good")]
)
def test_high_is_bad_boundaries(signal: str, diagnosis: str, p: float, side: str) -> None:
    verdict = diagnose(judgments({signal: p}), DEFAULT)
    if side == "bad":
        expected = p if signal == "conflict" else max(1.0 - 0.95, p)
        check(verdict, diagnosis, expected)
    elif side == "band":
        check(verdict, "JUDGE_UNCERTAIN", 0.5)
    else:
        check(verdict, "PASS", min(0.95, 1.0 - p))


@pytest.mark.parametrize(
    ("best", "diagnosis", "confidence"),
    [
        (0.2, "RETRIEVAL_MISS", 1.0 - 0.2),
        (0.2000001, "JUDGE_UNCERTAIN", 0.5),
        (0.7999999, "JUDGE_UNCERTAIN", 0.5),
        (0.8, "PASS", 0.95),
    ],
)
def test_best_chunk_boundaries(best: float, diagnosis: str, confidence: float) -> None:
    check(diagnose(judgments(chunks=[0.0, best, 0.1]), DEFAULT), diagnosis, confidence)


def test_custom_thresholds_move_the_boundaries() -> None:
    t = Thresholds(fail=0.3, pass_=0.6)
    check(diagnose(judgments(sufficiency=0.3), t), "RETRIEVAL_INSUFFICIENT", 1.0 - 0.3)
    check(diagnose(judgments(sufficiency=0.6), t), "PASS", 0.6)
    check(diagnose(judgments(sufficiency=0.59), t), "JUDGE_UNCERTAIN", 0.5)
    check(diagnose(judgments(conflict=0.6), t), "CONFLICTING_EVIDENCE", 0.6)
    check(diagnose(judgments(chunks=[0.3]), t), "RETRIEVAL_MISS", 1.0 - 0.3)
    # 0.25 is uncertain under the defaults but a confident "no" here
    check(diagnose(judgments(relevance=0.25), t), "ANSWER_IRRELEVANT", 1.0 - 0.25)


# -- the best chunk decides, not the mean ---------------------------------------------------------


def test_many_middling_chunks_and_one_high_chunk_do_not_fall_back() -> None:
    verdict = diagnose(judgments(chunks=[0.5] * 10 + [0.9]), DEFAULT)
    check(verdict, "PASS", 0.95)


def test_many_irrelevant_chunks_and_one_high_chunk_are_not_a_miss() -> None:
    # the mean (about 0.13) is low; the best chunk (0.9) is what counts
    verdict = diagnose(judgments(chunks=[0.05] * 10 + [0.9]), DEFAULT)
    check(verdict, "PASS", 0.95)


def test_middling_best_chunk_falls_back() -> None:
    check(diagnose(judgments(chunks=[0.1, 0.5, 0.3]), DEFAULT), "JUDGE_UNCERTAIN", 0.5)


@pytest.mark.parametrize("position", [0, 5, 10])
def test_position_of_the_best_chunk_does_not_matter(position: int) -> None:
    chunks = [0.1] * 10
    chunks.insert(position, 0.9)
    check(diagnose(judgments(chunks=chunks), DEFAULT), "PASS", 0.95)


# -- precedence -----------------------------------------------------------------------------------

ALL_BAD: dict[str, float | None] = {
    "sufficiency": 0.0,
    "relevance": 0.0,
    "groundedness": 0.0,
    "contradiction": 1.0,
    "correctness": 0.0,
}


def test_conflict_high_beats_everything() -> None:
    verdict = diagnose(judgments(ALL_BAD, chunks=[], conflict=0.85), DEFAULT)
    check(verdict, "CONFLICTING_EVIDENCE", 0.85)
    verdict = diagnose(judgments(ALL_BAD, chunks=[0.0], conflict=0.85), DEFAULT)
    check(verdict, "CONFLICTING_EVIDENCE", 0.85)


def test_no_contexts_beats_everything_but_conflict() -> None:
    check(diagnose(judgments(ALL_BAD, chunks=[]), DEFAULT), "RETRIEVAL_MISS", 1.0)


def test_retrieval_miss_beats_insufficiency() -> None:
    verdict = diagnose(judgments(ALL_BAD, chunks=[0.1]), DEFAULT)
    check(verdict, "RETRIEVAL_MISS", 1.0 - 0.1)


def test_retrieval_beats_generation() -> None:
    verdict = diagnose(judgments(ALL_BAD), DEFAULT)
    check(verdict, "RETRIEVAL_INSUFFICIENT", 1.0)
    verdict = diagnose(judgments(sufficiency=0.15, relevance=0.1, groundedness=0.1), DEFAULT)
    check(verdict, "RETRIEVAL_INSUFFICIENT", 1.0 - 0.15)


def test_irrelevant_answer_beats_ungrounded_and_incorrect() -> None:
    verdict = diagnose(
        judgments(relevance=0.1, groundedness=0.0, contradiction=1.0, correctness=0.0), DEFAULT
    )
    check(verdict, "ANSWER_IRRELEVANT", 1.0 - 0.1)
    assert verdict.route == "auto"


def test_ungrounded_beats_incorrect() -> None:
    verdict = diagnose(judgments(groundedness=0.1, correctness=0.0), DEFAULT)
    check(verdict, "GENERATOR_UNGROUNDED", 1.0 - 0.1)


@pytest.mark.parametrize(
    ("overrides", "diagnosis"),
    [
        ({"sufficiency": 0.1, "relevance": 0.5}, "RETRIEVAL_INSUFFICIENT"),
        ({"relevance": 0.1, "sufficiency": 0.5}, "ANSWER_IRRELEVANT"),
        ({"groundedness": 0.1, "correctness": 0.5}, "GENERATOR_UNGROUNDED"),
        ({"correctness": 0.1, "sufficiency": 0.5}, "ANSWER_INCORRECT"),
        ({"conflict": 0.9, "sufficiency": 0.5}, "CONFLICTING_EVIDENCE"),
    ],
)
def test_a_confident_failure_beats_an_uncertain_signal(
    overrides: dict[str, float | None], diagnosis: str
) -> None:
    assert diagnose(judgments(overrides), DEFAULT).diagnosis == diagnosis


def test_an_uncertain_chunk_does_not_beat_a_confident_failure() -> None:
    verdict = diagnose(judgments(chunks=[0.5], correctness=0.1), DEFAULT)
    check(verdict, "ANSWER_INCORRECT", 1.0 - 0.1)


# -- confidences ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("groundedness", "contradiction", "confidence"),
    [
        (0.1, 0.95, 0.95),  # contradiction is larger
        (0.05, 0.85, 1.0 - 0.05),  # 1 - groundedness is larger
        (0.1, 0.5, 1.0 - 0.1),  # contradiction in the band still counts in the max
        (0.5, 0.9, 0.9),  # groundedness in the band: 1 - g = 0.5 < 0.9
        (0.15, 0.05, 1.0 - 0.15),
    ],
)
def test_ungrounded_confidence_is_max_of_both(
    groundedness: float, contradiction: float, confidence: float
) -> None:
    verdict = diagnose(judgments(groundedness=groundedness, contradiction=contradiction), DEFAULT)
    check(verdict, "GENERATOR_UNGROUNDED", confidence)


@pytest.mark.parametrize(
    ("overrides", "confidence"),
    [
        ({"sufficiency": 0.85}, 0.85),
        ({"conflict": 0.15}, 1.0 - 0.15),
        ({"relevance": 0.82}, 0.82),
        ({"groundedness": 0.81}, 0.81),
        ({"contradiction": 0.12}, 1.0 - 0.12),
        ({"correctness": 0.83}, 0.83),
        ({"sufficiency": 0.9, "relevance": 0.84, "contradiction": 0.11}, 0.84),
    ],
)
def test_pass_confidence_is_the_weakest_signal(
    overrides: dict[str, float | None], confidence: float
) -> None:
    check(diagnose(judgments(overrides), DEFAULT), "PASS", confidence)


def test_pass_confidence_ignores_chunk_relevance() -> None:
    check(diagnose(judgments(chunks=[0.81]), DEFAULT), "PASS", 0.95)


def test_absent_correctness_is_never_used() -> None:
    # without correctness: never ANSWER_INCORRECT, never uncertain because of it, not in min()
    check(diagnose(judgments(correctness=None), DEFAULT), "PASS", 0.95)
    check(diagnose(judgments(correctness=None, sufficiency=0.86), DEFAULT), "PASS", 0.86)
    # the same row with a correctness answer does use it
    check(diagnose(judgments(correctness=0.83), DEFAULT), "PASS", 0.83)
    check(diagnose(judgments(correctness=0.0), DEFAULT), "ANSWER_INCORRECT", 1.0)


def test_a_missing_required_judgment_is_a_bug() -> None:
    with pytest.raises(ValueError, match="sufficiency"):
        diagnose(judgments(sufficiency=None), DEFAULT)


# -- thresholds -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fail", "pass_"),
    [
        (0.5, 0.5),
        (0.6, 0.5),
        (-0.1, 0.8),
        (0.2, 1.1),
        (-0.0001, 0.5),
        (0.5, 1.0000001),
        (math.nan, 0.8),
        (0.2, math.nan),
    ],
)
def test_invalid_thresholds_raise_config_error(fail: float, pass_: float) -> None:
    with pytest.raises(ConfigError, match="0 <= fail < pass <= 1"):
        Thresholds(fail=fail, pass_=pass_)


@pytest.mark.parametrize(("fail", "pass_"), [(0.0, 1.0), (0.0, 0.0001), (0.9999, 1.0), (0.2, 0.8)])
def test_valid_thresholds(fail: float, pass_: float) -> None:
    t = Thresholds(fail=fail, pass_=pass_)
    assert (t.fail, t.pass_) == (fail, pass_)


def test_default_thresholds() -> None:
    assert (DEFAULT.fail, DEFAULT.pass_) == (0.2, 0.8)


# -- properties -----------------------------------------------------------------------------------

EDGES = [0.0, 0.2, 0.2000001, 0.5, 0.7999999, 0.8, 1.0]
probability = st.one_of(st.sampled_from(EDGES), st.floats(0.0, 1.0))


@st.composite
def any_judgments(draw: st.DrawFn) -> Judgments:
    chunks = draw(st.lists(probability, max_size=12))
    return judgments(
        chunks=chunks,
        sufficiency=draw(probability),
        conflict=draw(probability),
        relevance=draw(probability),
        groundedness=draw(probability),
        contradiction=draw(probability),
        correctness=draw(st.none() | probability),
    )


@st.composite
def any_thresholds(draw: st.DrawFn) -> Thresholds:
    a = draw(st.one_of(st.sampled_from([0.0, 0.2, 0.8, 1.0]), st.floats(0.0, 1.0)))
    b = draw(st.one_of(st.sampled_from([0.0, 0.2, 0.8, 1.0]), st.floats(0.0, 1.0)))
    if a == b:
        a, b = (0.0, 1.0) if a in (0.0, 1.0) else (0.0, a)
    return Thresholds(fail=min(a, b), pass_=max(a, b))


@settings(max_examples=300)
@given(any_judgments(), st.one_of(st.just(DEFAULT), any_thresholds()))
def test_route_is_fallback_iff_uncertain_and_confidence_is_a_probability(
    j: Judgments, t: Thresholds
) -> None:
    verdict = diagnose(j, t)
    assert verdict.diagnosis in DIAGNOSES
    assert (verdict.route == "fallback") == (verdict.diagnosis == "JUDGE_UNCERTAIN")
    assert verdict.route in ("auto", "fallback")
    assert 0.0 <= verdict.confidence <= 1.0
    if verdict.diagnosis == "JUDGE_UNCERTAIN":
        assert verdict.confidence == 0.5


@settings(max_examples=200)
@given(any_judgments())
def test_only_the_best_chunk_matters(j: Judgments) -> None:
    chunks = j.retrieval.chunk_relevance
    best = {"only": max(chunks.values())} if chunks else {}
    collapsed = j.model_copy(
        update={"retrieval": j.retrieval.model_copy(update={"chunk_relevance": best})}
    )
    assert diagnose(collapsed, DEFAULT) == diagnose(j, DEFAULT)
