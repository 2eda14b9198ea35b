"""Answer checks and abstention metrics: example tables plus properties."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragbatch.core._schema import Golden
from ragbatch.metrics._answer_checks import (
    AnswerCheck,
    abstention_metrics,
    aggregate_checks,
    check_answer,
    contains_phrase,
    normalize,
)

# -- normalisation --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("  Written   APPROVAL.\n", "written approval"),
        ('"Hello," she said!', "hello she said"),
        ("\ufb01le \uff21\uff22\uff23", "file abc"),  # NFKC: ligature and full-width letters
        ("Straße", "strasse"),  # casefold, not lower
        ("e-mail don't 3.5%", "e-mail don't 3.5"),  # inner punctuation stays
        ("(see §4) — done", "see 4 done"),  # § is punctuation too; a lone dash is dropped
        ("", ""),
    ],
)
def test_normalize(raw: str, expected: str) -> None:
    assert normalize(raw) == expected


def test_phrases_match_whole_words_only() -> None:
    text = normalize("Disapproval is not the same as written approval.")
    assert contains_phrase(text, "Written Approval")
    assert contains_phrase(text, "approval")
    assert not contains_phrase(text, "approv")
    assert not contains_phrase(normalize("disapproval"), "approval")
    assert not contains_phrase(text, "...")  # normalises to nothing: never "found"


# -- per-row checks -------------------------------------------------------------------------------

GOLDEN = Golden(
    expected_answer_contains=["written approval", "Certificate of Compliance"],
    must_not_contain=["cost estimate", "$"],
)


def test_all_expected_phrases_present_and_nothing_forbidden() -> None:
    answer = "External contractors need WRITTEN approval and a certificate of compliance."
    check = check_answer(answer, GOLDEN)
    assert check == AnswerCheck(
        contains_pass=True, must_not_contain_pass=True, missing=[], forbidden=[]
    )


def test_missing_and_forbidden_phrases_are_listed() -> None:
    answer = "They need written approval; the cost estimate is 500."
    check = check_answer(answer, GOLDEN)
    assert check.contains_pass is False
    assert check.missing == ["Certificate of Compliance"]
    assert check.must_not_contain_pass is False
    assert check.forbidden == ["cost estimate"]  # "$" normalises to nothing and is ignored


def test_no_labels_means_no_verdict() -> None:
    assert check_answer("anything", None) == AnswerCheck(
        contains_pass=None, must_not_contain_pass=None, missing=[], forbidden=[]
    )
    only_banned = check_answer("fine", Golden(must_not_contain=["bad"]))
    assert only_banned.contains_pass is None
    assert only_banned.must_not_contain_pass is True


def test_aggregate_rates_count_only_rows_with_that_check() -> None:
    checks = [
        check_answer("written approval, certificate of compliance", GOLDEN),  # pass, pass
        check_answer("written approval and a cost estimate", GOLDEN),  # fail, fail
        check_answer("ok", Golden(must_not_contain=["bad"])),  # -, pass
        check_answer("ok", None),  # unlabelled
    ]
    total = aggregate_checks(checks)
    assert total.rows == 3
    assert (total.contains_rows, total.contains_passed, total.contains_pass_rate) == (2, 1, 0.5)
    assert total.must_not_contain_rows == 3
    assert total.must_not_contain_passed == 2
    assert total.must_not_contain_pass_rate == pytest.approx(2 / 3)
    keys = total.model_dump(by_alias=True)
    assert "containsPassRate" in keys
    assert "mustNotContainPassRate" in keys


def test_aggregate_of_nothing_is_zero() -> None:
    total = aggregate_checks([])
    assert (total.rows, total.contains_pass_rate, total.must_not_contain_pass_rate) == (0, 0, 0)


# -- abstention -----------------------------------------------------------------------------------


def test_abstention_table() -> None:
    pairs = [
        (0.9, True),  # abstained, should: correct
        (0.2, True),  # answered, should have abstained: false answer
        (0.5, True),  # P == threshold counts as abstaining: correct
        (0.7, False),  # abstained though it should answer: false abstention
        (0.1, False),  # answered: correct
    ]
    result = abstention_metrics(pairs)
    assert result.count == 5
    assert (result.should_abstain, result.should_answer) == (3, 2)
    assert (result.abstained, result.correct) == (3, 3)
    assert (result.false_answers, result.false_abstentions) == (1, 1)
    assert result.accuracy == pytest.approx(3 / 5)
    assert result.false_answer_rate == pytest.approx(1 / 3)
    assert result.false_abstention_rate == pytest.approx(1 / 2)
    assert result.refusal_rate == pytest.approx(3 / 5)
    data = result.model_dump(by_alias=True)
    assert {"accuracy", "falseAbstentionRate", "falseAnswerRate", "refusalRate"} <= set(data)


def test_abstention_threshold_and_empty_denominators() -> None:
    only_unanswerable = abstention_metrics([(0.6, True), (0.4, True)], threshold=0.7)
    assert only_unanswerable.false_answer_rate == 1.0
    assert only_unanswerable.false_abstention_rate == 0.0  # no row should answer: safe 0
    assert only_unanswerable.should_answer == 0
    empty = abstention_metrics([])
    assert (empty.count, empty.accuracy, empty.false_answer_rate) == (0, 0.0, 0.0)


pairs_strategy = st.lists(
    st.tuples(st.floats(0.0, 1.0, allow_nan=False), st.booleans()), max_size=40
)


@settings(max_examples=100, deadline=None)
@given(pairs_strategy, st.randoms())
def test_abstention_rates_in_unit_interval_and_order_free(
    pairs: list[tuple[float, bool]], rnd: random.Random
) -> None:
    result = abstention_metrics(pairs)
    for rate in (
        result.accuracy,
        result.false_abstention_rate,
        result.false_answer_rate,
        result.refusal_rate,
    ):
        assert 0.0 <= rate <= 1.0
    assert result.correct + result.false_answers + result.false_abstentions == result.count
    shuffled = list(pairs)
    rnd.shuffle(shuffled)
    assert abstention_metrics(shuffled) == result


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=60))
def test_normalize_is_idempotent(text: str) -> None:
    once = normalize(text)
    assert normalize(once) == once
    assert "  " not in once
    assert once == once.strip()
