"""Golden-set sections of the report: ranking, answer checks, abstention, slices (pure).

Label-based and judge-independent: retrieval ranking (Hit/Recall/Precision/Context
Precision/NDCG at K, MRR) and must-contain checks. Judged by Jev: abstention quality and the
agreement of Jev's chunk relevance with the golden documents. Then slices (never trust the
aggregate alone) and the diagnostic matrix for weak metrics, upstream layer first.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ragbatch.core import Context, Golden, Judgments, RowOutcome, count_hops, turns_of
from ragbatch.metrics import _scores as m
from ragbatch.metrics._answer_checks import (
    Abstention,
    AbstentionAccumulator,
    AnswerCheck,
    AnswerChecks,
    ChecksAccumulator,
    check_answer,
)
from ragbatch.metrics._claims import low_authority_support, supported_only_by_low_authority
from ragbatch.metrics._diagnostic_matrix import Finding, diagnose_metrics
from ragbatch.metrics._ranking import (
    RankingAccumulator,
    RetrievalRanking,
    RowRanking,
    is_labelled,
    rank_golden,
)
from ragbatch.metrics._scores import Out
from ragbatch.metrics._slices import RULE, Slice, SliceAccumulator, SliceItem, slice_keys

CATEGORY_TARGET = {"happy": 0.6, "edge": 0.2, "unanswerable": 0.2}
MIN_LABELLED = 50
AUTHORITY_IDS = 50  # ids of flagged rows kept for the authority section
# Where a metric is "weak" for the diagnostic matrix (ragbatch defaults, not seed values).
WEAK_BELOW = {
    "recall@10": 0.8,
    "contextPrecision@10": 0.7,
    "faithfulness": 0.9,
}
WEAK_ABOVE = {"falseAnswerRate": 0.05}


class ChunkAgreement(Out):
    """Jev's chunk relevance (p >= 0.5) against golden documents, for contexts ranked <= K."""

    chunks: int
    agreement: float


class GoldenHealth(Out):
    labelled_rows: int
    categories: dict[str, int]
    shares: dict[str, float]
    target: dict[str, float]
    warnings: list[str]


class Slices(Out):
    rule: str
    slices: list[Slice]


class Counterfactual(Out):
    """Abstention on counterfactual rows (answer documents removed) next to the originals."""

    counterfactual: Abstention
    original: Abstention | None = None


class Authority(Out):
    """Source authority, reported apart from entailment (never fed to the support question)."""

    rows_with_authority: int
    supported_only_by_low_authority: int  # basic or claim mode, see rows[].lowAuthoritySupport
    ids: list[str]
    low_authority: str = "user-generated, forum, unknown, or a number below 0.5"


class GoldenSections(Out):
    retrieval_ranking: RetrievalRanking | None = None
    answer_checks: AnswerChecks | None = None
    abstention: Abstention | None = None
    chunk_agreement: dict[str, ChunkAgreement] | None = None
    golden_health: GoldenHealth | None = None
    slices: Slices | None = None
    diagnostics: list[Finding] | None = None
    counterfactual: Counterfactual | None = None
    authority: Authority | None = None


def row_ranking(o: RowOutcome, ks: Sequence[int]) -> RowRanking | None:
    return rank_golden(o.row.contexts, o.row.golden, ks)


def row_check(o: RowOutcome) -> AnswerCheck | None:
    golden = o.row.golden
    if golden is None or not (golden.expected_answer_contains or golden.must_not_contain):
        return None
    return check_answer(o.row.answer, golden)


def _grounded_agreement(o: RowOutcome) -> bool | None:
    """Judged grounded (p >= 0.5) agrees with the groundedness label; None without either."""
    labels = o.row.expected.generation if o.row.expected else None
    grounded = o.jev.judgments.generation.groundedness if o.jev.judgments else None
    if grounded is None or labels is None or labels.groundedness is None:
        return None
    return (grounded >= 0.5) == labels.groundedness


def _slice_item(
    o: RowOutcome,
    ranking: RowRanking | None,
    check: AnswerCheck | None,
    k: str,
    fields: Sequence[str],
) -> SliceItem:
    row = o.row
    judged = o.jev.trace
    size = (count_hops(judged.trace), len(turns_of(judged.trace))) if judged else None
    keys = slice_keys(row.question, [c.text for c in row.contexts], row.metadata, fields, size)
    if row.golden is not None and row.golden.expected_classification is not None:
        keys["expectedClassification"] = row.golden.expected_classification
    authorities = sorted({str(c.authority) for c in row.contexts if c.authority is not None})
    if authorities:
        keys["authority"] = "+".join(authorities)
    expected = row.expected.diagnosis if row.expected else None
    verdict = o.jev.verdict
    correct = None if expected is None else (verdict is not None and verdict.diagnosis == expected)
    values: dict[str, float | bool | None] = {
        "accuracy": correct,
        "groundedness": _grounded_agreement(o),
        f"recall@{k}": ranking.at[k].recall if ranking else None,
        "mrr": ranking.reciprocal_rank if ranking else None,
        "containsPass": check.contains_pass if check else None,
    }
    return SliceItem(keys=keys, values=values)


class GoldenAccumulator:
    """Every golden-set section, fed one row at a time in input order.

    Keeps counters, exact sums (equal to ``math.fsum``), one cell per distinct slice value and
    at most :data:`AUTHORITY_IDS` ids, never per-row data, so memory does not grow with the
    rows. :meth:`result` equals the list-based computation over the same rows, byte for byte
    once serialised.
    """

    def __init__(self, ks: Sequence[int], slice_by: Sequence[str]) -> None:
        self.ks = tuple(ks)
        self.slice_by = tuple(slice_by)
        self.top = str(max(self.ks))
        self.ranking = RankingAccumulator(self.ks)
        self.checks = ChecksAccumulator()
        self.abstention = AbstentionAccumulator()
        self.counterfactual = AbstentionAccumulator()
        self.original = AbstentionAccumulator()
        # per K: [chunks judged, chunks where Jev agrees with the golden documents]
        self.chunks: dict[str, list[int]] = {str(k): [0, 0] for k in self.ks}
        self.has_golden = False
        self.categorised = 0  # golden rows with any category, targeted or not
        self.categories = dict.fromkeys(CATEGORY_TARGET, 0)
        self.grounded = self.grounded_agree = 0
        self.slices = SliceAccumulator(
            ["accuracy", "groundedness", f"recall@{self.top}", "mrr", "containsPass"]
        )
        self.authority_rows = self.flagged = 0
        self.flagged_ids: list[str] = []

    def add(self, o: RowOutcome, ranking: RowRanking | None, check: AnswerCheck | None) -> None:
        """One row, with its ``row_ranking(o, ks)`` and ``row_check(o)``."""
        golden, j = o.row.golden, o.jev.judgments
        if ranking is not None:
            self.ranking.add(ranking)
        if check is not None:
            self.checks.add(check)
        if (
            golden is not None
            and golden.expected_abstention is not None
            and j is not None
            and (p := j.generation.abstention) is not None
        ):
            self.abstention.add(p, golden.expected_abstention)
            split = self.counterfactual if golden.counterfactual_of is not None else self.original
            split.add(p, golden.expected_abstention)
        if golden is not None:
            self.has_golden = True
            if golden.category:
                self.categorised += 1
                category = str(golden.category)
                if category in self.categories:
                    self.categories[category] += 1
            if j is not None and is_labelled(golden):
                self._add_chunks(o.row.contexts, golden, j)
        if (agrees := _grounded_agreement(o)) is not None:
            self.grounded += 1
            self.grounded_agree += agrees
        self.slices.add(_slice_item(o, ranking, check, self.top, self.slice_by))
        if any(c.authority is not None for c in o.row.contexts):
            self.authority_rows += 1
            claims = o.jev.claims
            if (claims is not None and supported_only_by_low_authority(o.row, claims)) or (
                claims is None and low_authority_support(o)
            ):
                self.flagged += 1
                if len(self.flagged_ids) < AUTHORITY_IDS:
                    self.flagged_ids.append(o.row.id)

    def _add_chunks(self, contexts: Sequence[Context], golden: Golden, j: Judgments) -> None:
        """Jev's chunk relevance against the golden documents, per K (labelled, judged rows)."""
        relevant = set(golden.expected_documents) | {d for d, g in golden.relevance.items() if g}
        for rank, context in enumerate(contexts, start=1):
            p = j.retrieval.chunk_relevance.get(context.id)
            if p is None:
                continue
            agrees = (p >= 0.5) == ((context.source or context.id) in relevant)
            for k in self.ks:
                if rank <= k:
                    counts = self.chunks[str(k)]
                    counts[0] += 1
                    counts[1] += agrees

    def result(self) -> GoldenSections:
        """Every golden-set section; sections without data are left out of the report."""
        labelled = self.ranking.rows
        ranking = self.ranking.result() if labelled else None
        abstention = self.abstention.result() if self.abstention.count else None
        return GoldenSections(
            retrieval_ranking=ranking,
            answer_checks=self.checks.result() if self.checks.checks else None,
            abstention=abstention,
            chunk_agreement=(
                {
                    k: ChunkAgreement(chunks=n, agreement=m.safe(agreed, n))
                    for k, (n, agreed) in self.chunks.items()
                }
                if labelled
                else None
            ),
            golden_health=self._health(labelled) if self.has_golden else None,
            slices=Slices(rule=RULE, slices=self.slices.result()),
            diagnostics=(
                weak_metrics(
                    ranking,
                    abstention,
                    m.safe(self.grounded_agree, self.grounded) if self.grounded else None,
                )
                if self.has_golden
                else None
            ),
            counterfactual=(
                Counterfactual(
                    counterfactual=self.counterfactual.result(),
                    original=self.original.result() if self.original.count else None,
                )
                if self.counterfactual.count
                else None
            ),
            authority=(
                Authority(
                    rows_with_authority=self.authority_rows,
                    supported_only_by_low_authority=self.flagged,
                    ids=list(self.flagged_ids),
                )
                if self.authority_rows
                else None
            ),
        )

    def _health(self, labelled: int) -> GoldenHealth:
        total = self.categorised
        shares = {c: m.safe(n, total) for c, n in self.categories.items()}
        warnings = []
        if labelled < MIN_LABELLED:
            warnings.append(
                f"only {labelled} labelled rows: fewer than {MIN_LABELLED}, metrics are noisy"
            )
        for category, target in CATEGORY_TARGET.items():
            if total and abs(shares[category] - target) > 0.1:
                warnings.append(
                    f"{category} rows are {shares[category]:.0%} of the golden set (target {target:.0%})"
                )
        return GoldenHealth(
            labelled_rows=labelled,
            categories=dict(self.categories),
            shares=shares,
            target=CATEGORY_TARGET,
            warnings=warnings,
        )


def golden_sections(
    outcomes: Iterable[RowOutcome], ks: Sequence[int], slice_by: Sequence[str]
) -> GoldenSections:
    """Every golden-set section; sections without data are left out of the report."""
    total = GoldenAccumulator(ks, slice_by)
    for o in outcomes:
        total.add(o, row_ranking(o, ks), row_check(o))
    return total.result()


def weak_metrics(
    ranking: RetrievalRanking | None, abstention: Abstention | None, faithfulness: float | None
) -> list[Finding]:
    """Diagnostic-matrix findings for the metrics below (or above) the ragbatch defaults.

    ``faithfulness``: the share of rows whose judged groundedness agrees with its label.
    """
    values: dict[str, float] = {}
    if ranking is not None and "10" in ranking.at:
        values["recall@10"] = ranking.at["10"].recall
        values["contextPrecision@10"] = ranking.at["10"].context_precision
    if faithfulness is not None:
        values["faithfulness"] = faithfulness
    if abstention is not None:
        values["falseAnswerRate"] = abstention.false_answer_rate
    return diagnose_metrics(values, {**WEAK_BELOW, **WEAK_ABOVE})
