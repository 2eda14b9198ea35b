"""Golden-set sections of the report: ranking, answer checks, abstention, slices (pure).

Label-based and judge-independent: retrieval ranking (Hit/Recall/Precision/Context
Precision/NDCG at K, MRR) and must-contain checks. Judged by Jev: abstention quality and the
agreement of Jev's chunk relevance with the golden documents. Then slices (never trust the
aggregate alone) and the diagnostic matrix for weak metrics, upstream layer first.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from ragbatch import metrics as m
from ragbatch.answer_checks import (
    Abstention,
    AnswerCheck,
    AnswerChecks,
    abstention_metrics,
    aggregate_checks,
    check_answer,
)
from ragbatch.claim_metrics import low_authority_support, supported_only_by_low_authority
from ragbatch.diagnostics import Finding, diagnose_metrics
from ragbatch.metrics import Out
from ragbatch.outcome import RowOutcome
from ragbatch.ranking import (
    RetrievalRanking,
    RowRanking,
    aggregate_ranking,
    rank_golden,
)
from ragbatch.slices import RULE, Slice, SliceItem, mean_metrics, slice_keys, slice_table

CATEGORY_TARGET = {"happy": 0.6, "edge": 0.2, "unanswerable": 0.2}
MIN_LABELLED = 50
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


def _chunk_agreement(
    outcomes: Sequence[RowOutcome], ks: Sequence[int]
) -> dict[str, ChunkAgreement]:
    per_k: dict[str, list[bool]] = {str(k): [] for k in ks}
    for o in outcomes:
        golden, j = o.row.golden, o.jev.judgments
        if golden is None or j is None or not (golden.expected_documents or golden.relevance):
            continue
        relevant = set(golden.expected_documents) | {d for d, g in golden.relevance.items() if g}
        for rank, context in enumerate(o.row.contexts, start=1):
            p = j.retrieval.chunk_relevance.get(context.id)
            if p is None:
                continue
            doc = context.source or context.id
            for k in ks:
                if rank <= k:
                    per_k[str(k)].append((p >= 0.5) == (doc in relevant))
    return {
        k: ChunkAgreement(chunks=len(v), agreement=m.safe(sum(v), len(v))) for k, v in per_k.items()
    }


def _health(outcomes: Sequence[RowOutcome], labelled: int) -> GoldenHealth:
    counts: Counter[str] = Counter(
        str(o.row.golden.category) for o in outcomes if o.row.golden and o.row.golden.category
    )
    total = sum(counts.values())
    shares = {c: m.safe(counts.get(c, 0), total) for c in CATEGORY_TARGET}
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
        categories={c: counts.get(c, 0) for c in CATEGORY_TARGET},
        shares=shares,
        target=CATEGORY_TARGET,
        warnings=warnings,
    )


def _slice_item(
    o: RowOutcome, ranking: RowRanking | None, k: str, fields: Sequence[str]
) -> SliceItem:
    row = o.row
    keys = slice_keys(row.question, [c.text for c in row.contexts], row.metadata, fields)
    if row.golden is not None and row.golden.expected_classification is not None:
        keys["expectedClassification"] = row.golden.expected_classification
    authorities = sorted({str(c.authority) for c in row.contexts if c.authority is not None})
    if authorities:
        keys["authority"] = "+".join(authorities)
    expected = row.expected.diagnosis if row.expected else None
    verdict = o.jev.verdict
    correct = None if expected is None else (verdict is not None and verdict.diagnosis == expected)
    check = row_check(o)
    labels = row.expected.generation if row.expected else None
    grounded = o.jev.judgments.generation.groundedness if o.jev.judgments else None
    values: dict[str, float | bool | None] = {
        "accuracy": correct,
        "groundedness": (
            (grounded >= 0.5) == labels.groundedness
            if grounded is not None and labels is not None and labels.groundedness is not None
            else None
        ),
        f"recall@{k}": ranking.at[k].recall if ranking else None,
        "mrr": ranking.reciprocal_rank if ranking else None,
        "containsPass": check.contains_pass if check else None,
    }
    return SliceItem(keys=keys, values=values)


def golden_sections(
    outcomes: Sequence[RowOutcome], ks: Sequence[int], slice_by: Sequence[str]
) -> GoldenSections:
    """Every golden-set section; sections without data are left out of the report."""
    rankings = [row_ranking(o, ks) for o in outcomes]
    labelled = [r for r in rankings if r is not None]
    checks = [c for o in outcomes if (c := row_check(o)) is not None]
    pairs = [
        (p, o.row.golden.expected_abstention)
        for o in outcomes
        if o.row.golden is not None
        and o.row.golden.expected_abstention is not None
        and o.jev.judgments is not None
        and (p := o.jev.judgments.generation.abstention) is not None
    ]
    has_golden = any(o.row.golden is not None for o in outcomes)
    top = str(max(ks))
    items = [_slice_item(o, r, top, slice_by) for o, r in zip(outcomes, rankings, strict=True)]
    names = ["accuracy", "groundedness", f"recall@{top}", "mrr", "containsPass"]
    table = slice_table(items, mean_metrics(names))
    ranking = aggregate_ranking(labelled, ks) if labelled else None
    abstention = abstention_metrics(pairs) if pairs else None
    is_cf = [
        o.row.golden is not None and o.row.golden.counterfactual_of is not None
        for o in outcomes
        if o.row.golden is not None
        and o.row.golden.expected_abstention is not None
        and o.jev.judgments is not None
        and o.jev.judgments.generation.abstention is not None
    ]
    cf_pairs = [p for p, cf in zip(pairs, is_cf, strict=True) if cf]
    original = [p for p, cf in zip(pairs, is_cf, strict=True) if not cf]
    counterfactual = (
        Counterfactual(
            counterfactual=abstention_metrics(cf_pairs),
            original=abstention_metrics(original) if original else None,
        )
        if cf_pairs
        else None
    )
    return GoldenSections(
        retrieval_ranking=ranking,
        answer_checks=aggregate_checks(checks) if checks else None,
        abstention=abstention,
        chunk_agreement=_chunk_agreement(outcomes, ks) if labelled else None,
        golden_health=_health(outcomes, len(labelled)) if has_golden else None,
        slices=Slices(rule=RULE, slices=table),
        diagnostics=weak_metrics(ranking, abstention, outcomes) if has_golden else None,
        counterfactual=counterfactual,
        authority=_authority(outcomes),
    )


def _authority(outcomes: Sequence[RowOutcome]) -> Authority | None:
    rows = [o for o in outcomes if any(c.authority is not None for c in o.row.contexts)]
    if not rows:
        return None
    flagged = [
        o.row.id
        for o in rows
        if (o.jev.claims is not None and supported_only_by_low_authority(o.row, o.jev.claims))
        or (o.jev.claims is None and low_authority_support(o))
    ]
    return Authority(
        rows_with_authority=len(rows),
        supported_only_by_low_authority=len(flagged),
        ids=flagged[:50],
    )


def weak_metrics(
    ranking: RetrievalRanking | None, abstention: Abstention | None, outcomes: Sequence[RowOutcome]
) -> list[Finding]:
    """Diagnostic-matrix findings for the metrics below (or above) the ragbatch defaults."""
    values: dict[str, float] = {}
    if ranking is not None and "10" in ranking.at:
        values["recall@10"] = ranking.at["10"].recall
        values["contextPrecision@10"] = ranking.at["10"].context_precision
    judged = [o for o in outcomes if o.jev.judgments is not None and o.row.expected]
    grounded = [
        (o.jev.judgments.generation.groundedness >= 0.5) == o.row.expected.generation.groundedness
        for o in judged
        if o.jev.judgments and o.row.expected and o.row.expected.generation
        and o.row.expected.generation.groundedness is not None
        and o.jev.judgments.generation.groundedness is not None
    ]  # fmt: skip
    if grounded:
        values["faithfulness"] = m.safe(sum(grounded), len(grounded))
    if abstention is not None:
        values["falseAnswerRate"] = abstention.false_answer_rate
    return diagnose_metrics(values, {**WEAK_BELOW, **WEAK_ABOVE})
