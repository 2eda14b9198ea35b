"""Retrieval ranking metrics against golden-set labels (pure: no I/O).

A row is *labelled* for ranking when its golden block names ``expectedDocuments`` or grades
documents in ``relevance``; unlabelled rows are not ranked and not counted. A row's ranking is
its contexts in order, each named by its ``source`` (the document id) or, without one, by its
context id; later chunks of an already-seen document are dropped, so K counts distinct
documents and a document keeps its first (best) rank.

Definitions, for a cut-off K over the ranked documents ``d_1, d_2, ...`` and the set R of
relevant documents (the expected documents plus every document graded > 0):

- Hit@K = 1 when any of ``d_1..d_K`` is relevant, else 0.
- Recall@K = |relevant in top K| / |R| (relevant documents never retrieved count in |R|).
- Precision@K = |relevant in top K| / K, the standard IR convention (trec_eval ``P_k``): a row
  with fewer than K documents is not rewarded for retrieving less.
- Context Precision@K = Σ_{i=1..K} Precision@i · rel_i / |R| (docs/semantics.md §3a; rel_i is
  1 for a relevant document). With |R| as the denominator this is trec_eval's AP@K. It is 0
  when nothing is relevant.
- Reciprocal rank = 1 / rank of the first relevant document over the whole ranking (0 if none);
  MRR is its mean.
- NDCG@K = DCG@K / IDCG@K with DCG = Σ gain_i / log2(i + 1). The gain is the document's grade
  when the row grades any document (graded), else 1 for every relevant document (binary). An
  expected document without a grade counts as grade 1; an explicit grade 0 on an expected
  document keeps it relevant but gives it no gain. IDCG@K is the DCG of the ideal ordering of
  the grades of ALL relevant documents, retrieved or not.

Aggregates are plain means over labelled rows (``math.fsum``), so they do not depend on row
order. Every value is in [0, 1].
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

from ragbatch.core import Context, Golden
from ragbatch.metrics._scores import ExactSum, Out, safe

DEFAULT_KS: tuple[int, ...] = (1, 3, 5, 10)


class AtK(Out):
    """The ranking metrics of one cut-off K (for a row, or averaged over rows)."""

    hit: float
    recall: float
    precision: float
    context_precision: float
    ndcg: float


class RowRanking(Out):
    """One labelled row's ranking metrics; ``at`` is keyed by ``str(K)``."""

    relevant: int
    first_relevant_rank: int | None
    reciprocal_rank: float
    at: dict[str, AtK]


class RetrievalRanking(Out):
    """Means over the labelled rows (``rows`` counts them); ``at`` is keyed by ``str(K)``."""

    rows: int
    mrr: float
    at: dict[str, AtK]


def ranked_documents(contexts: Iterable[Context]) -> list[str]:
    """Document ids in rank order: ``source`` or else the context id, first rank kept."""
    seen: set[str] = set()
    ranked: list[str] = []
    for context in contexts:
        document = context.source if context.source is not None else context.id
        if document not in seen:
            seen.add(document)
            ranked.append(document)
    return ranked


def is_labelled(golden: Golden | None) -> bool:
    """True when the golden block labels retrieval (expected documents or grades)."""
    return golden is not None and bool(golden.expected_documents or golden.relevance)


def _check_ks(ks: Iterable[int]) -> tuple[int, ...]:
    out = tuple(ks)
    for k in out:
        if k < 1:
            raise ValueError(f"K must be >= 1, got {k}")
    return out


def _dcg(gains: Iterable[float]) -> float:
    return math.fsum(gain / math.log2(i + 1) for i, gain in enumerate(gains, start=1))


def rank_row(
    ranked: Sequence[str],
    expected_documents: Iterable[str],
    relevance: Mapping[str, int],
    ks: Iterable[int] = DEFAULT_KS,
) -> RowRanking:
    """Ranking metrics of one row: ``ranked`` from :func:`ranked_documents`, labels from golden."""
    ks = _check_ks(ks)
    expected = set(expected_documents)
    relevant = expected | {doc for doc, grade in relevance.items() if grade > 0}
    graded = bool(relevance)

    def gain(doc: str) -> float:
        if doc not in relevant:
            return 0.0
        return float(relevance.get(doc, 1)) if graded else 1.0

    flags = [doc in relevant for doc in ranked]
    first = next((i for i, hit in enumerate(flags, start=1) if hit), None)
    ideal = sorted((gain(doc) for doc in relevant), reverse=True)
    total = len(relevant)

    # Precision@i for every rank where a relevant document sits, accumulated once.
    found = 0
    precision_terms: list[float] = []
    for i, hit in enumerate(flags, start=1):
        if hit:
            found += 1
            precision_terms.append(found / i)

    at: dict[str, AtK] = {}
    for k in ks:
        top = flags[:k]
        hits = sum(top)
        idcg = _dcg(ideal[:k])
        dcg = _dcg(gain(doc) for doc in ranked[:k])
        at[str(k)] = AtK(
            hit=1.0 if hits else 0.0,
            recall=safe(hits, total),
            precision=hits / k,
            context_precision=safe(math.fsum(precision_terms[:hits]), total),
            ndcg=safe(dcg, idcg),
        )
    return RowRanking(
        relevant=total,
        first_relevant_rank=first,
        reciprocal_rank=1.0 / first if first is not None else 0.0,
        at=at,
    )


def rank_golden(
    contexts: Iterable[Context], golden: Golden | None, ks: Iterable[int] = DEFAULT_KS
) -> RowRanking | None:
    """A row's ranking from its contexts and golden block, or None when it is unlabelled."""
    if golden is None or not is_labelled(golden):
        return None
    return rank_row(ranked_documents(contexts), golden.expected_documents, golden.relevance, ks)


class _AtKSums:
    """Exact running sums of the five metrics of one cut-off."""

    __slots__ = ("context_precision", "hit", "ndcg", "precision", "recall")

    def __init__(self) -> None:
        self.hit, self.recall, self.precision = ExactSum(), ExactSum(), ExactSum()
        self.context_precision, self.ndcg = ExactSum(), ExactSum()

    def add(self, at: AtK) -> None:
        self.hit.add(at.hit)
        self.recall.add(at.recall)
        self.precision.add(at.precision)
        self.context_precision.add(at.context_precision)
        self.ndcg.add(at.ndcg)

    def mean(self, n: int) -> AtK:
        return AtK(
            hit=safe(self.hit.value(), n),
            recall=safe(self.recall.value(), n),
            precision=safe(self.precision.value(), n),
            context_precision=safe(self.context_precision.value(), n),
            ndcg=safe(self.ndcg.value(), n),
        )


def _sums(keys: Iterable[str]) -> dict[str, _AtKSums]:
    return {key: _AtKSums() for key in keys}


class RankingAccumulator:
    """Means over labelled rows, fed one :class:`RowRanking` at a time.

    Keeps a row count and exact sums (equal to ``math.fsum`` over every row), so its memory does
    not grow with the rows. ``ks`` defaults to the first row's cut-offs (or DEFAULT_KS when no
    row comes); ``at`` keeps their order.
    """

    __slots__ = ("_at", "_rr", "rows")

    def __init__(self, ks: Iterable[int] | None = None) -> None:
        self.rows = 0
        self._rr = ExactSum()
        self._at = None if ks is None else _sums(str(k) for k in _check_ks(ks))

    def add(self, row: RowRanking) -> None:
        if self._at is None:
            self._at = _sums(row.at)
        self.rows += 1
        self._rr.add(row.reciprocal_rank)
        for key, sums in self._at.items():
            sums.add(row.at[key])

    def result(self) -> RetrievalRanking:
        at = self._at if self._at is not None else _sums(str(k) for k in DEFAULT_KS)
        n = self.rows
        return RetrievalRanking(
            rows=n,
            mrr=safe(self._rr.value(), n),
            at={key: sums.mean(n) for key, sums in at.items()},
        )


def aggregate_ranking(
    rows: Iterable[RowRanking], ks: Iterable[int] | None = None
) -> RetrievalRanking:
    """Means over labelled rows. ``ks`` defaults to the first row's cut-offs (or DEFAULT_KS)."""
    total = RankingAccumulator(ks)
    for row in rows:
        total.add(row)
    return total.result()
