"""Retrieval ranking: hand-computed cases, properties, and a cross-check against ir-measures."""

from __future__ import annotations

import math
import random

import ir_measures
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ir_measures import AP, RR, P, R, nDCG

from ragbatch.core._schema import Context, Golden
from ragbatch.metrics._ranking import (
    DEFAULT_KS,
    AtK,
    RowRanking,
    aggregate_ranking,
    is_labelled,
    rank_golden,
    rank_row,
    ranked_documents,
)

approx = pytest.approx


def ctx(cid: str, source: str | None = None) -> Context:
    return Context(id=cid, text=f"text of {cid}", source=source)


# -- ranked documents -----------------------------------------------------------------------------


def test_ranked_documents_use_source_then_id_and_keep_first_rank() -> None:
    contexts = [ctx("c1", "A"), ctx("c2", "A"), ctx("c3", "B"), ctx("c4"), ctx("c5", "B")]
    assert ranked_documents(contexts) == ["A", "B", "c4"]


def test_duplicates_do_not_count_twice() -> None:
    ranked = ranked_documents([ctx("c1", "A"), ctx("c2", "A"), ctx("c3", "B")])
    row = rank_row(ranked, ["A"], {}, ks=(2,))
    # [A, B]: one relevant among two distinct documents, not two among two chunks
    assert row.at["2"].precision == 0.5
    assert row.at["2"].recall == 1.0


# -- hand-computed cases --------------------------------------------------------------------------


def test_binary_case_with_a_relevant_document_never_retrieved() -> None:
    # relevant = {a, b, c}; c is never retrieved; ranking a x b y
    row = rank_row(["a", "x", "b", "y"], ["a", "b", "c"], {}, ks=(1, 3, 10))
    assert row.relevant == 3
    assert row.first_relevant_rank == 1
    assert row.reciprocal_rank == 1.0
    at1, at3, at10 = row.at["1"], row.at["3"], row.at["10"]
    assert at1 == AtK(hit=1.0, recall=1 / 3, precision=1.0, context_precision=1 / 3, ndcg=1.0)
    assert at3.hit == 1.0
    assert at3.recall == approx(2 / 3)
    assert at3.precision == approx(2 / 3)
    # (P@1 * 1 + P@3 * 1) / 3 = (1 + 2/3) / 3
    assert at3.context_precision == approx(5 / 9)
    # DCG = 1 + 1/log2(4); IDCG over all three relevant = 1 + 1/log2(3) + 1/log2(4)
    assert at3.ndcg == approx(1.5 / (1 + 1 / math.log2(3) + 0.5))
    # precision divides by K even when fewer than K documents were retrieved
    assert at10.precision == approx(2 / 10)
    assert at10.recall == approx(2 / 3)


def test_graded_ndcg_uses_grades_and_the_ideal_of_all_relevant() -> None:
    # grades: a 3, b 1, z 2 (z never retrieved), n 0 (not relevant)
    row = rank_row(["x", "a", "n", "b"], [], {"a": 3, "b": 1, "z": 2, "n": 0}, ks=(3, 4))
    assert row.relevant == 3
    assert row.first_relevant_rank == 2
    assert row.reciprocal_rank == 0.5
    ideal = 3 + 2 / math.log2(3) + 1 / math.log2(4)
    assert row.at["3"].ndcg == approx((3 / math.log2(3)) / ideal)
    assert row.at["4"].ndcg == approx((3 / math.log2(3) + 1 / math.log2(5)) / ideal)
    # context precision is binary: (P@2 + P@4) / 3 = (1/2 + 2/4) / 3
    assert row.at["4"].context_precision == approx(1 / 3)


def test_expected_document_without_grade_counts_as_grade_one() -> None:
    row = rank_row(["e", "g"], ["e"], {"g": 2}, ks=(2,))
    # DCG = 1 + 2/log2(3); ideal = 2 + 1/log2(3)
    assert row.at["2"].ndcg == approx((1 + 2 / math.log2(3)) / (2 + 1 / math.log2(3)))


def test_nothing_relevant_gives_zeros() -> None:
    row = rank_row(["a", "b"], [], {"a": 0}, ks=(1, 3))
    assert row.relevant == 0
    assert row.first_relevant_rank is None
    assert row.reciprocal_rank == 0.0
    assert all(value == 0.0 for at in row.at.values() for value in at.model_dump().values())


def test_bad_k_is_rejected() -> None:
    with pytest.raises(ValueError, match="K must be >= 1"):
        rank_row(["a"], ["a"], {}, ks=(0,))


def test_unlabelled_rows_are_not_ranked() -> None:
    assert not is_labelled(None)
    assert not is_labelled(Golden())
    assert not is_labelled(Golden(expected_answer_contains=["x"]))
    assert rank_golden([ctx("c1")], Golden(), DEFAULT_KS) is None
    ranked = rank_golden([ctx("c1", "D")], Golden(expected_documents=["D"]))
    assert ranked is not None
    assert list(ranked.at) == ["1", "3", "5", "10"]


def test_aggregate_is_the_mean_over_labelled_rows() -> None:
    one = rank_row(["a"], ["a"], {}, ks=(1,))
    two = rank_row(["x", "a"], ["a"], {}, ks=(1,))
    total = aggregate_ranking([one, two])
    assert total.rows == 2
    assert total.mrr == 0.75
    assert total.at["1"].hit == 0.5
    assert total.at["1"].recall == 0.5
    empty = aggregate_ranking([])
    assert empty.rows == 0
    assert empty.mrr == 0.0
    assert list(empty.at) == ["1", "3", "5", "10"]
    assert list(aggregate_ranking([one], ks=(1,)).at) == ["1"]


def test_report_keys_are_camel_case() -> None:
    row = rank_row(["a"], ["a"], {}, ks=(10,))
    data = row.model_dump(by_alias=True)
    assert set(data) == {"relevant", "firstRelevantRank", "reciprocalRank", "at"}
    assert set(data["at"]["10"]) == {"hit", "recall", "precision", "contextPrecision", "ndcg"}
    total = aggregate_ranking([row]).model_dump(by_alias=True)
    assert set(total) == {"rows", "mrr", "at"}


# -- properties -----------------------------------------------------------------------------------

DOCS = [f"d{i}" for i in range(12)]
rankings = st.lists(st.sampled_from(DOCS), max_size=12, unique=True)
grades = st.dictionaries(st.sampled_from(DOCS), st.integers(0, 3), max_size=8)
expected_docs = st.lists(st.sampled_from(DOCS), max_size=5)
KS = (1, 2, 3, 5, 10, 20)


@settings(max_examples=200, deadline=None)
@given(rankings, expected_docs, grades)
def test_properties(ranked: list[str], expected: list[str], relevance: dict[str, int]) -> None:
    row = rank_row(ranked, expected, relevance, ks=KS)
    for at in row.at.values():
        for value in at.model_dump().values():
            assert 0.0 <= value <= 1.0 + 1e-12
    recalls = [row.at[str(k)].recall for k in KS]
    hits = [row.at[str(k)].hit for k in KS]
    assert recalls == sorted(recalls)
    assert hits == sorted(hits)
    assert 0.0 <= row.reciprocal_rank <= 1.0
    relevant = set(expected) | {d for d, g in relevance.items() if g > 0}
    if ranked and ranked[0] in relevant:
        assert row.reciprocal_rank == 1.0
        assert row.at["1"].hit == 1.0


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(rankings, expected_docs, grades), min_size=1, max_size=6), st.randoms())
def test_aggregate_ignores_row_order(
    cases: list[tuple[list[str], list[str], dict[str, int]]], rnd: random.Random
) -> None:
    rows: list[RowRanking] = [rank_row(r, e, g, ks=KS) for r, e, g in cases]
    shuffled = list(rows)
    rnd.shuffle(shuffled)
    assert aggregate_ranking(rows) == aggregate_ranking(shuffled)


# -- cross-check against an established IR evaluation library ---------------------------------------

CUTOFFS = (1, 3, 5, 10)


def test_matches_ir_measures_on_random_rankings() -> None:
    rnd = random.Random(4)
    pool = [f"doc{i}" for i in range(30)]
    qrels: list[ir_measures.Qrel] = []
    run: list[ir_measures.ScoredDoc] = []
    ours: dict[str, RowRanking] = {}
    for q in range(50):
        qid = f"q{q}"
        judged = rnd.sample(pool, rnd.randint(1, 10))
        relevance = {doc: rnd.randint(0, 3) for doc in judged}
        relevance[judged[0]] = rnd.randint(1, 3)  # at least one relevant document
        ranked = rnd.sample(pool, rnd.randint(1, 15))
        qrels += [ir_measures.Qrel(qid, doc, grade) for doc, grade in relevance.items()]
        # strictly decreasing scores: the run's order is our rank order
        run += [ir_measures.ScoredDoc(qid, doc, float(100 - i)) for i, doc in enumerate(ranked)]
        ours[qid] = rank_row(ranked, [], relevance, ks=CUTOFFS)
    measures = [RR] + [m @ k for k in CUTOFFS for m in (P, R, nDCG, AP)]
    theirs: dict[tuple[str, str], float] = {
        (metric.query_id, str(metric.measure)): metric.value
        for metric in ir_measures.iter_calc(measures, qrels, run)
    }
    assert len(theirs) == 50 * len(measures)
    for qid, row in ours.items():
        assert row.reciprocal_rank == approx(theirs[qid, "RR"])
        for k in CUTOFFS:
            at = row.at[str(k)]
            assert at.precision == approx(theirs[qid, f"P@{k}"]), (qid, k)
            assert at.recall == approx(theirs[qid, f"R@{k}"]), (qid, k)
            assert at.ndcg == approx(theirs[qid, f"nDCG@{k}"]), (qid, k)
            # Context Precision@K with |relevant| as denominator is AP@K (trec map_cut_K)
            assert at.context_precision == approx(theirs[qid, f"AP@{k}"]), (qid, k)
