"""Slices: built-in keys, metadata keys, and the flag rule on planted data."""

from __future__ import annotations

import random
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragbatch.metrics._slices import (
    NONE_VALUE,
    RULE,
    SliceItem,
    _token_sets,
    context_count_bucket,
    is_near_duplicate_top3,
    jaccard,
    mean_metrics,
    mean_of,
    query_length_bucket,
    rule_text,
    slice_keys,
    slice_table,
)


@pytest.mark.parametrize(
    ("tokens", "bucket"), [(0, "≤5"), (5, "≤5"), (6, "6\u201314"), (14, "6\u201314"), (15, "≥15")]
)
def test_query_length_buckets(tokens: int, bucket: str) -> None:
    assert query_length_bucket("  ".join(["word"] * tokens)) == bucket


@pytest.mark.parametrize(
    ("count", "bucket"),
    [(0, "0"), (1, "1"), (2, "2-3"), (3, "2-3"), (4, "4-6"), (6, "4-6"), (7, "7+"), (40, "7+")],
)
def test_context_count_buckets(count: int, bucket: str) -> None:
    assert context_count_bucket(count) == bucket


def test_near_duplicates_only_count_in_the_top_three() -> None:
    base = "the contractor policy requires written approval before work starts"
    assert jaccard(base, base.upper() + "!") == 1.0
    assert jaccard("", "") == 1.0
    assert is_near_duplicate_top3(["other text entirely", base, base])
    assert not is_near_duplicate_top3(["a b c", "d e f", "g h i", "a b c"])
    assert not is_near_duplicate_top3([base])
    # 9 of 10 shared tokens: Jaccard 0.9 counts as near-identical
    nine = " ".join(f"t{i}" for i in range(9))
    assert jaccard(nine + " x", nine) == 0.9
    assert is_near_duplicate_top3([nine + " x", nine])


def test_slice_keys_builtin_and_metadata() -> None:
    keys = slice_keys(
        "what approval is needed",
        ["a", "b", "c"],
        {"topic": "policy", "year": 2024, "tags": ["x"], "owner": {"team": "hr"}, "gone": None},
        ["topic", "year", "tags", "owner.team", "gone", "missing", "contextCount"],
    )
    assert keys == {
        "queryLength": "≤5",
        "contextCount": "2-3",
        "nearDuplicateTop3": "no",
        "topic": "policy",
        "year": "2024",
        "tags": '["x"]',
        "owner.team": "hr",
        "gone": NONE_VALUE,
        "missing": NONE_VALUE,
        "metadata.contextCount": NONE_VALUE,
    }
    assert slice_keys("q", [], None, ["topic"])["topic"] == NONE_VALUE


# -- the table and its flag -------------------------------------------------------------------------


def item(topic: str, correct: bool, recall: float | None = 1.0) -> SliceItem:
    return SliceItem(keys={"topic": topic}, values={"correct": correct, "recall": recall})


def planted() -> list[SliceItem]:
    good = [item("hr", True) for _ in range(20)]
    bad = [item("billing", i == 0, 0.2) for i in range(6)]  # 1 of 6 correct
    tiny = [item("legal", False, 0.0) for _ in range(2)]  # far worse, but only 2 rows
    return good + bad + tiny


def test_a_planted_bad_slice_is_flagged_and_a_small_one_is_not() -> None:
    table = slice_table(planted(), mean_metrics(["correct", "recall"]))
    by_value = {s.value: s for s in table}
    assert [s.value for s in table] == ["billing", "hr", "legal"]
    billing = by_value["billing"]
    assert billing.rows == 6
    assert billing.flag
    assert billing.reason is not None
    assert "correct" in billing.reason and "recall" in billing.reason
    assert billing.metrics["correct"] == pytest.approx(1 / 6)
    assert billing.deltas["correct"] == pytest.approx(1 / 6 - 21 / 28)
    legal = by_value["legal"]
    assert legal.rows == 2
    assert not legal.flag
    assert legal.reason is None
    assert not by_value["hr"].flag


def test_min_rows_and_drop_are_parameters() -> None:
    table = slice_table(planted(), mean_metrics(["correct"]), min_rows=2, drop=0.9)
    assert [s.value for s in table if s.flag] == []
    table = slice_table(planted(), mean_metrics(["correct"]), min_rows=2)
    assert {s.value for s in table if s.flag} == {"billing", "legal"}


def test_a_drop_of_exactly_the_limit_is_not_flagged() -> None:
    # whole 0.8, slice 0.7: a drop of 0.1 (0.10000000000000009 in floats)
    items = [SliceItem({"g": "a"}, {"m": 0.7}) for _ in range(5)]
    items += [SliceItem({"g": "b"}, {"m": 0.9}) for _ in range(5)]
    assert not any(s.flag for s in slice_table(items, mean_metrics(["m"]), drop=0.1))


def test_lower_is_better_metrics_flag_on_a_rise() -> None:
    items = [SliceItem({"g": "a"}, {"falseAnswer": True}) for _ in range(5)]
    items += [SliceItem({"g": "b"}, {"falseAnswer": False}) for _ in range(15)]
    table = slice_table(items, mean_metrics(["falseAnswer"]), lower_is_better={"falseAnswer"})
    assert [s.value for s in table if s.flag] == ["a"]
    plain = slice_table(items, mean_metrics(["falseAnswer"]))
    assert [s.value for s in plain if s.flag] == ["b"]  # read as higher-is-better


def test_missing_values_are_skipped_not_zero() -> None:
    items = [SliceItem({"g": "a"}, {"m": None}) for _ in range(6)]
    items += [SliceItem({"g": "b"}, {"m": 1.0}) for _ in range(6)]
    table = slice_table(items, {"m": mean_of("m")})
    a = next(s for s in table if s.value == "a")
    assert a.metrics == {"m": None}
    assert a.deltas == {"m": None}
    assert not a.flag


def test_builtin_values_keep_their_natural_order() -> None:
    items = [
        SliceItem(slice_keys(" ".join(["w"] * n), ["x"] * c), {"m": 1.0})
        for n, c in [(20, 9), (3, 0), (8, 2)]
    ]
    table = slice_table(items, mean_metrics(["m"]))
    order = [(s.dimension, s.value) for s in table]
    assert order[:3] == [
        ("queryLength", "≤5"),
        ("queryLength", "6\u201314"),
        ("queryLength", "≥15"),
    ]
    assert order[3:6] == [("contextCount", "0"), ("contextCount", "2-3"), ("contextCount", "7+")]


def test_rule_is_stated() -> None:
    assert rule_text(5, 0.10) == RULE
    assert "at least 5 rows" in RULE
    assert "0.1" in RULE


@settings(max_examples=50, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from("xyz"), st.floats(0, 1, allow_nan=False)), min_size=1, max_size=30
    ),
    st.randoms(),
)
def test_table_ignores_row_order(rows: list[tuple[str, float]], rnd: random.Random) -> None:
    items = [SliceItem({"g": g}, {"m": m}) for g, m in rows]
    shuffled = list(items)
    rnd.shuffle(shuffled)
    assert slice_table(items, mean_metrics(["m"])) == slice_table(shuffled, mean_metrics(["m"]))


@settings(max_examples=500)
@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=60))
def test_ascii_text_is_tokenized_as_the_regex_does(text: str) -> None:
    # the byte-table split of ASCII text gives exactly the casefolded \w+ tokens
    assert _token_sets([text]) == [{w.encode() for w in re.findall(r"\w+", text.casefold())}]


def test_texts_beside_a_non_ascii_one_are_all_tokenized_by_the_regex() -> None:
    sets = _token_sets(["Straße ÉTÉ naïve_1, x", "A b"])
    assert sets == [{"strasse", "été", "naïve_1", "x"}, {"a", "b"}]


@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=40), st.text(max_size=40))
def test_jaccard_of_ascii_and_other_text_is_the_regex_tokens(ascii_text: str, other: str) -> None:
    # one text split by the byte table, the other by the regex: the same words still match
    def tokens(text: str) -> set[str]:
        return set(re.findall(r"\w+", text.casefold()))

    for a, b in ((ascii_text, ascii_text + " é " + other), (ascii_text, other)):
        left, right = tokens(a), tokens(b)
        expected = len(left & right) / len(left | right) if left or right else 1.0
        assert jaccard(a, b) == expected
