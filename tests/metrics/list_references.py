"""The list-based computations the streaming accumulators replaced, kept as references for
tests/metrics/test_accumulators.py and test_accumulator_pieces.py.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

from ragbatch.core._claims import MISSING_CITATION, VETO_RULE, is_veto, label_fails
from ragbatch.core._outcome import RowOutcome
from ragbatch.metrics import _scores as m
from ragbatch.metrics._answer_checks import Abstention, AnswerCheck, AnswerChecks
from ragbatch.metrics._claims import (
    NO_FIT_THRESHOLD,
    ClaimMetrics,
    ClaimRowInput,
    SliceStat,
    _authority,
    _evidence_text,
    _judge,
    _length_bucket,
    _rank_bucket,
    lexical_verdict,
    low_authority_support,
    supported_only_by_low_authority,
)
from ragbatch.metrics._diagnostic_matrix import Finding, diagnose_metrics
from ragbatch.metrics._golden import (
    CATEGORY_TARGET,
    MIN_LABELLED,
    WEAK_ABOVE,
    WEAK_BELOW,
    Authority,
    ChunkAgreement,
    Counterfactual,
    GoldenHealth,
    GoldenSections,
    Slices,
    row_check,
    row_ranking,
)
from ragbatch.metrics._ranking import DEFAULT_KS, AtK, RetrievalRanking, RowRanking
from ragbatch.metrics._slices import RULE, SliceItem, mean_metrics, slice_keys, slice_table

# -- the list-based computations as they were, for reference ----------------------------------


def ref_ranking(rows: Sequence[RowRanking], ks: Sequence[int] | None) -> RetrievalRanking:
    if ks is None:
        keys = list(rows[0].at) if rows else [str(k) for k in DEFAULT_KS]
    else:
        keys = [str(k) for k in ks]
    n = len(rows)

    def mean(values: Any) -> float:
        return m.safe(math.fsum(values), n)

    at = {
        key: AtK(
            hit=mean(r.at[key].hit for r in rows),
            recall=mean(r.at[key].recall for r in rows),
            precision=mean(r.at[key].precision for r in rows),
            context_precision=mean(r.at[key].context_precision for r in rows),
            ndcg=mean(r.at[key].ndcg for r in rows),
        )
        for key in keys
    }
    return RetrievalRanking(rows=n, mrr=mean(r.reciprocal_rank for r in rows), at=at)


def ref_checks(checks: Sequence[AnswerCheck]) -> AnswerChecks:
    contains = [c.contains_pass for c in checks if c.contains_pass is not None]
    banned = [c.must_not_contain_pass for c in checks if c.must_not_contain_pass is not None]
    rows = sum(c.contains_pass is not None or c.must_not_contain_pass is not None for c in checks)
    return AnswerChecks(
        rows=rows,
        contains_rows=len(contains),
        contains_passed=sum(contains),
        contains_pass_rate=m.safe(sum(contains), len(contains)),
        must_not_contain_rows=len(banned),
        must_not_contain_passed=sum(banned),
        must_not_contain_pass_rate=m.safe(sum(banned), len(banned)),
    )


def ref_abstention(pairs: Sequence[tuple[float, bool]], threshold: float = 0.5) -> Abstention:
    decided = [(p >= threshold, expected) for p, expected in pairs]
    n = len(pairs)
    should_abstain = sum(expected for _, expected in decided)
    false_abstentions = sum(a and not expected for a, expected in decided)
    false_answers = sum(expected and not a for a, expected in decided)
    abstained = sum(a for a, _ in decided)
    correct = sum(a == expected for a, expected in decided)
    return Abstention(
        count=n,
        threshold=threshold,
        should_abstain=should_abstain,
        should_answer=n - should_abstain,
        abstained=abstained,
        correct=correct,
        false_abstentions=false_abstentions,
        false_answers=false_answers,
        accuracy=m.safe(correct, n),
        false_abstention_rate=m.safe(false_abstentions, n - should_abstain),
        false_answer_rate=m.safe(false_answers, should_abstain),
        refusal_rate=m.safe(abstained, n),
        brier=m.brier(pairs),
    )


def ref_slice_item(
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


def ref_chunk_agreement(rows: Sequence[RowOutcome], ks: Sequence[int]) -> dict[str, ChunkAgreement]:
    per_k: dict[str, list[bool]] = {str(k): [] for k in ks}
    for o in rows:
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


def ref_health(rows: Sequence[RowOutcome], labelled: int) -> GoldenHealth:
    counts: Counter[str] = Counter(
        str(o.row.golden.category) for o in rows if o.row.golden and o.row.golden.category
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


def ref_authority(rows: Sequence[RowOutcome]) -> Authority | None:
    with_authority = [o for o in rows if any(c.authority is not None for c in o.row.contexts)]
    if not with_authority:
        return None
    flagged = [
        o.row.id
        for o in with_authority
        if (o.jev.claims is not None and supported_only_by_low_authority(o.row, o.jev.claims))
        or (o.jev.claims is None and low_authority_support(o))
    ]
    return Authority(
        rows_with_authority=len(with_authority),
        supported_only_by_low_authority=len(flagged),
        ids=flagged[:50],
    )


def ref_weak_metrics(
    ranking: RetrievalRanking | None, abstention: Abstention | None, rows: Sequence[RowOutcome]
) -> list[Finding]:
    values: dict[str, float] = {}
    if ranking is not None and "10" in ranking.at:
        values["recall@10"] = ranking.at["10"].recall
        values["contextPrecision@10"] = ranking.at["10"].context_precision
    grounded = [
        (o.jev.judgments.generation.groundedness >= 0.5) == o.row.expected.generation.groundedness
        for o in rows
        if o.jev.judgments and o.row.expected and o.row.expected.generation
        and o.row.expected.generation.groundedness is not None
        and o.jev.judgments.generation.groundedness is not None
    ]  # fmt: skip
    if grounded:
        values["faithfulness"] = m.safe(sum(grounded), len(grounded))
    if abstention is not None:
        values["falseAnswerRate"] = abstention.false_answer_rate
    return diagnose_metrics(values, {**WEAK_BELOW, **WEAK_ABOVE})


def ref_golden_sections(
    rows: Sequence[RowOutcome], ks: Sequence[int], slice_by: Sequence[str]
) -> GoldenSections:
    rankings = [row_ranking(o, ks) for o in rows]
    labelled = [r for r in rankings if r is not None]
    checks = [c for o in rows if (c := row_check(o)) is not None]
    judged = [
        (p, o.row.golden.expected_abstention, o.row.golden.counterfactual_of is not None)
        for o in rows
        if o.row.golden is not None
        and o.row.golden.expected_abstention is not None
        and o.jev.judgments is not None
        and (p := o.jev.judgments.generation.abstention) is not None
    ]
    pairs = [(p, e) for p, e, _ in judged]
    cf_pairs = [(p, e) for p, e, cf in judged if cf]
    original = [(p, e) for p, e, cf in judged if not cf]
    has_golden = any(o.row.golden is not None for o in rows)
    top = str(max(ks))
    items = [ref_slice_item(o, r, top, slice_by) for o, r in zip(rows, rankings, strict=True)]
    names = ["accuracy", "groundedness", f"recall@{top}", "mrr", "containsPass"]
    ranking = ref_ranking(labelled, ks) if labelled else None
    abstention = ref_abstention(pairs) if pairs else None
    return GoldenSections(
        retrieval_ranking=ranking,
        answer_checks=ref_checks(checks) if checks else None,
        abstention=abstention,
        chunk_agreement=ref_chunk_agreement(rows, ks) if labelled else None,
        golden_health=ref_health(rows, len(labelled)) if has_golden else None,
        slices=Slices(rule=RULE, slices=slice_table(items, mean_metrics(names))),
        diagnostics=ref_weak_metrics(ranking, abstention, rows) if has_golden else None,
        counterfactual=(
            Counterfactual(
                counterfactual=ref_abstention(cf_pairs),
                original=ref_abstention(original) if original else None,
            )
            if cf_pairs
            else None
        ),
        authority=ref_authority(rows),
    )


def ref_claim_metrics(
    rows: Sequence[ClaimRowInput], extractor: str, scope: str, extra_slices: Sequence[str] = ()
) -> ClaimMetrics:
    jev: list[tuple[str, str, float]] = []
    lex: list[tuple[str, str, float]] = []
    keys_of: list[dict[str, str]] = []
    jev_answers: list[tuple[bool, bool]] = []
    lex_answers: list[tuple[bool, bool]] = []
    total = missing = uncertain = no_fit = judged = vetoed = deferred = 0
    for item in rows:
        labels = (item.row.expected.claims if item.row.expected else None) or {}
        total += len(item.results)
        vetoed += any(is_veto(r) for r in item.results)
        lexical = {}
        for r in item.results:
            if r.verdict == MISSING_CITATION:
                missing += 1
                continue
            judged += 1
            uncertain += r.uncertain
            no_fit += r.confidence < NO_FIT_THRESHOLD
            lexical[r.claim.id] = lexical_verdict(r.claim.text, _evidence_text(item.row, r))
            label = labels.get(r.claim.id)
            if label is None:
                continue
            jev.append((label, r.verdict, r.confidence))
            lex.append((label, *lexical[r.claim.id]))
            meta = r.claim.metadata or {}
            keys = {
                "type": str(meta.get("type", "(none)")),
                "language": str(meta.get("language", "(none)")),
                "adversarial": str(meta.get("adversarial", "(none)")).lower(),
                "passageLength": _length_bucket(len(_evidence_text(item.row, r))),
                "citedRank": _rank_bucket(item.row, r),
                "authority": _authority(item.row, r),
            }
            keys.update({k: str(meta.get(k, "(none)")) for k in extra_slices})
            keys_of.append(keys)
        if item.results and all(r.claim.id in labels for r in item.results):
            truth = label_fails(
                [
                    (MISSING_CITATION if r.verdict == MISSING_CITATION else labels[r.claim.id],
                     r.claim.impact)
                    for r in item.results
                ]
            )  # fmt: skip
            if any(r.uncertain for r in item.results):
                deferred += 1
            else:
                jev_answers.append((any(is_veto(r) for r in item.results), truth))
            lex_fail = any(
                (r.verdict == MISSING_CITATION and r.claim.impact != "low")
                or (r.claim.id in lexical and lexical[r.claim.id][0] == "insufficient"
                    and r.claim.impact != "low")
                for r in item.results
            )  # fmt: skip
            lex_answers.append((lex_fail, truth))
    slices: dict[str, list[SliceStat]] = {}
    for name in keys_of[0] if keys_of else {}:
        values: dict[str, list[int]] = {}
        for keys, (gold, pred, _), (_, lpred, _) in zip(keys_of, jev, lex, strict=True):
            stat = values.setdefault(keys[name], [0, 0, 0])
            stat[0] += 1
            stat[1] += gold == pred
            stat[2] += gold == lpred
        slices[name] = [
            SliceStat(
                value=v, claims=n, accuracy=m.safe(ok, n), citation_check_accuracy=m.safe(lok, n)
            )
            for v, (n, ok, lok) in sorted(values.items())
        ]
    return ClaimMetrics(
        **dict(_judge(jev, sum(p == y for p, y in jev_answers), len(jev_answers))),
        extractor=extractor,
        scope=scope,
        veto_rule=VETO_RULE,
        total_claims=total,
        missing_citations=missing,
        no_fit_threshold=NO_FIT_THRESHOLD,
        no_fit_rate=m.safe(no_fit, judged),
        uncertain_rate=m.safe(uncertain, judged),
        rows_failed_by_veto=vetoed,
        answer_level_deferred=deferred,
        slices=slices,
        citation_check=_judge(lex, sum(p == y for p, y in lex_answers), len(lex_answers)),
    )
