"""The RAG app's text (pure): the same for the same seed and number, and each kind is what
word overlap, the mock's judge for rows without a mock block, tells apart."""

from __future__ import annotations

from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from ragbatch.core import Thresholds
from ragbatch.providers._lexical import coverage, tokens
from ragbatch.testing.rag_corpus import KINDS, OVERLAP_DIAGNOSIS, trace_content

FAIL, PASS = Thresholds().fail, Thresholds().pass_
seeds = st.integers(min_value=0, max_value=2**32)
indexes = st.integers(min_value=0, max_value=100_000)


@given(seeds, indexes)
def test_a_trace_is_its_seed_and_number(seed: int, index: int) -> None:
    assert trace_content(seed, index) == trace_content(seed, index)
    assert trace_content(seed, index).index == index


def test_seeds_give_different_traces() -> None:
    assert trace_content(1, 0) != trace_content(2, 0)
    assert len({trace_content(1, i).question for i in range(50)}) > 25


@given(seeds, indexes)
def test_overlap_tells_the_kinds_apart(seed: int, index: int) -> None:
    content = trace_content(seed, index)
    question, answer = tokens(content.question), tokens(content.answer)
    first = [tokens(d.content) for d in content.retrievals[0].documents]
    everything = frozenset().union(*first)
    best = max(coverage(question, doc) for doc in first)
    if content.kind == "irrelevant":
        assert best == 0.0  # no document holds a word of the question: a retrieval miss
        return
    assert best >= PASS  # the fact's document answers the question
    if content.kind == "grounded":
        assert coverage(answer, everything) == 1.0 and coverage(question, answer) >= PASS
    else:  # relevant enough not to be irrelevant, but its words are not the documents'
        assert coverage(answer, everything) <= FAIL < coverage(question, answer)


def test_the_mix_of_kinds_and_hops() -> None:
    traces = [trace_content(0, i) for i in range(2000)]
    kinds = Counter(t.kind for t in traces)
    assert set(kinds) == set(KINDS) == set(OVERLAP_DIAGNOSIS)
    assert 0.45 < kinds["grounded"] / 2000 < 0.55
    assert 0.15 < sum(len(t.retrievals) == 2 for t in traces) / 2000 < 0.25
    assert all(len(trace_content(0, i, multi_hop=0.0).retrievals) == 1 for i in range(200))
