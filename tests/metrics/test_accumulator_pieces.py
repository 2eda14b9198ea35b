"""The accumulators' pieces on random inputs (hypothesis) equal the list-based formulas they
replace (tests/metrics/list_references.py): ranking means, abstention, answer checks, slices.
"""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from ragbatch.metrics._answer_checks import AbstentionAccumulator, AnswerCheck, ChecksAccumulator
from ragbatch.metrics._ranking import AtK, RankingAccumulator, RowRanking
from ragbatch.metrics._slices import (
    BUILTIN_ORDER,
    SliceAccumulator,
    SliceItem,
    mean_metrics,
    slice_table,
)
from tests.metrics.list_references import ref_abstention, ref_checks, ref_ranking

# -- the pieces on random inputs ---------------------------------------------------------------

# Models are built by hand: st.builds would also fill the camelCase alias parameters.
unit = st.floats(0.0, 1.0)


@st.composite
def row_rankings(draw: st.DrawFn, keys: Sequence[str]) -> RowRanking:
    at = {
        key: AtK(
            hit=draw(unit),
            recall=draw(unit),
            precision=draw(unit),
            context_precision=draw(unit),
            ndcg=draw(unit),
        )
        for key in keys
    }
    return RowRanking(relevant=1, first_relevant_rank=None, reciprocal_rank=draw(unit), at=at)


@settings(max_examples=200, deadline=None)
@given(st.lists(row_rankings(["10", "1", "3"]), max_size=30), st.booleans())
def test_ranking_accumulator_equals_fsum_means(rows: list[RowRanking], given_ks: bool) -> None:
    ks = (10, 1, 3) if given_ks else None
    total = RankingAccumulator(ks)
    for r in rows:
        total.add(r)
    got = total.result()
    assert got == ref_ranking(rows, ks)
    if rows or given_ks:
        assert list(got.at) == ["10", "1", "3"]  # the cut-offs' order, not sorted


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(unit, st.booleans()), max_size=40), unit)
def test_abstention_accumulator_equals_the_list_formula(
    pairs: list[tuple[float, bool]], threshold: float
) -> None:
    total = AbstentionAccumulator(threshold)
    for p, expected in pairs:
        total.add(p, expected)
    assert total.count == len(pairs)
    assert total.result() == ref_abstention(pairs, threshold)


passes = st.none() | st.booleans()
answer_checks = st.tuples(passes, passes).map(
    lambda p: AnswerCheck(contains_pass=p[0], must_not_contain_pass=p[1], missing=[], forbidden=[])
)


@settings(max_examples=200, deadline=None)
@given(st.lists(answer_checks, max_size=30))
def test_checks_accumulator_equals_the_list_formula(checks: list[AnswerCheck]) -> None:
    total = ChecksAccumulator()
    for c in checks:
        total.add(c)
    assert total.checks == len(checks)
    assert total.result() == ref_checks(checks)


slice_values = st.none() | st.booleans() | unit
slice_items = st.builds(
    SliceItem,
    keys=st.fixed_dictionaries(
        {},
        optional={
            "queryLength": st.sampled_from(BUILTIN_ORDER["queryLength"]),
            "topic": st.sampled_from(["a", "b", "(none)", "Z"]),
            "team": st.sampled_from(["x", "y"]),
        },
    ),
    values=st.fixed_dictionaries({}, optional={"m": slice_values, "n": slice_values}),
)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(slice_items, max_size=40),
    st.integers(0, 6),
    st.sampled_from([0.0, 0.1, 0.3]),
    st.sampled_from([(), ("n",)]),
)
def test_slice_accumulator_equals_slice_table(
    items: list[SliceItem], min_rows: int, drop: float, lower: tuple[str, ...]
) -> None:
    total = SliceAccumulator(["m", "n", "m"], min_rows, drop, lower)
    for item in items:
        total.add(item)
    assert total.result() == slice_table(items, mean_metrics(["m", "n"]), min_rows, drop, lower)
