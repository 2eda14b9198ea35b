"""The streaming accumulators equal the list-based computations they replace.

Each accumulator is checked against an independent computation: the committed reports (made by
the list-based code), and the old list-based formulas kept below as references, on the bundled
fixtures and on random inputs.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import pickle
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragbatch.core._claims import EXTRACTORS, MISSING_CITATION, VETO_RULE, is_veto, label_fails
from ragbatch.core._outcome import RowOutcome
from ragbatch.data._jsonl import JsonlReader
from ragbatch.metrics import _scores as m
from ragbatch.metrics._answer_checks import (
    Abstention,
    AbstentionAccumulator,
    AnswerCheck,
    AnswerChecks,
    ChecksAccumulator,
)
from ragbatch.metrics._claims import (
    NO_FIT_THRESHOLD,
    ClaimMetrics,
    ClaimMetricsAccumulator,
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
    GoldenAccumulator,
    GoldenHealth,
    GoldenSections,
    Slices,
    row_check,
    row_ranking,
)
from ragbatch.metrics._ranking import (
    DEFAULT_KS,
    AtK,
    RankingAccumulator,
    RetrievalRanking,
    RowRanking,
)
from ragbatch.metrics._slices import (
    BUILTIN_ORDER,
    RULE,
    SliceAccumulator,
    SliceItem,
    mean_metrics,
    slice_keys,
    slice_table,
)
from ragbatch.providers._baseline import RecordedBaseline
from ragbatch.providers._mock import MockProvider
from ragbatch.run._runner import ClaimConfig, RunConfig, run_batch

ROOT = Path(__file__).resolve().parents[2]


@functools.cache
def outcomes(name: str) -> tuple[RowOutcome, ...]:
    """The mock run of ``datasets/<name>.jsonl`` (claim mode for the claims fixture)."""
    claims = ClaimConfig(EXTRACTORS["provided"], "cited") if name == "claims-fixture" else None
    reader = JsonlReader(ROOT / "datasets" / f"{name}.jsonl")
    config = RunConfig(concurrency=4, claims=claims)
    return tuple(anyio.run(run_batch, reader, MockProvider(), RecordedBaseline(), config))


def accumulate(
    rows: Sequence[RowOutcome], ks: Sequence[int], slice_by: Sequence[str]
) -> GoldenAccumulator:
    total = GoldenAccumulator(ks, slice_by)
    for o in rows:
        total.add(o, row_ranking(o, ks), row_check(o))
    return total


def claim_inputs(rows: Sequence[RowOutcome]) -> list[ClaimRowInput]:
    return [ClaimRowInput(o.row, o.jev.claims) for o in rows if o.jev.claims]


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


# -- the committed reports: what the list-based code wrote -------------------------------------


def as_json(value: Any) -> bytes:
    """A section as ``report_bytes`` serialises it (key order kept, None left out)."""
    if isinstance(value, list):
        return orjson.dumps([as_json_obj(v) for v in value])
    return orjson.dumps(as_json_obj(value))


def as_json_obj(value: Any) -> Any:
    return value.model_dump(mode="json", by_alias=True, exclude_none=True)


@pytest.mark.parametrize(
    ("dataset", "report", "slice_by"),
    [
        ("golden-fixture", "expected-report-golden.json", ("docType",)),
        ("rag-fixture", "expected-report.json", ()),
        ("claims-fixture", "expected-report-claims.json", ()),
    ],
)
def test_golden_accumulator_writes_the_committed_sections(
    dataset: str, report: str, slice_by: tuple[str, ...]
) -> None:
    got = as_json_obj(accumulate(outcomes(dataset), DEFAULT_KS, slice_by).result())
    committed = orjson.loads((ROOT / "reports" / report).read_bytes())
    committed["abstention"] = committed["modes"]["jevOnly"].get("abstention")
    aliases = [field.alias for field in GoldenSections.model_fields.values()]
    want = {k: committed[k] for k in aliases if committed.get(k) is not None}
    assert orjson.dumps(got) == orjson.dumps(want)


def test_claim_accumulator_writes_the_committed_section() -> None:
    total = ClaimMetricsAccumulator("provided", "cited")
    for item in claim_inputs(outcomes("claims-fixture")):
        total.add(item)
    committed = orjson.loads((ROOT / "reports/expected-report-claims.json").read_bytes())
    assert as_json(total.result()) == orjson.dumps(committed["modes"]["jevOnly"]["claims"])


# -- equality with the list-based references -------------------------------------------------


@pytest.mark.parametrize("dataset", ["golden-fixture", "rag-fixture", "claims-fixture"])
def test_golden_accumulator_equals_the_list_based_sections(dataset: str) -> None:
    rows = outcomes(dataset)
    for ks, slice_by in [(DEFAULT_KS, ("docType",)), ((3, 1, 3), ("topic", "docType"))]:
        assert accumulate(rows, ks, slice_by).result() == ref_golden_sections(rows, ks, slice_by)


def test_golden_pieces_equal_their_list_based_formulas_on_the_fixture() -> None:
    rows = outcomes("golden-fixture")
    rankings = [r for o in rows if (r := row_ranking(o, DEFAULT_KS)) is not None]
    ranking = RankingAccumulator(DEFAULT_KS)
    for r in rankings:
        ranking.add(r)
    assert ranking.result() == ref_ranking(rankings, DEFAULT_KS)
    checks = [c for o in rows if (c := row_check(o)) is not None]
    total = ChecksAccumulator()
    for c in checks:
        total.add(c)
    assert total.result() == ref_checks(checks)
    pairs = [
        (p, o.row.golden.expected_abstention)
        for o in rows
        if o.row.golden is not None
        and o.row.golden.expected_abstention is not None
        and o.jev.judgments is not None
        and (p := o.jev.judgments.generation.abstention) is not None
    ]
    abstention = AbstentionAccumulator()
    for p, expected in pairs:
        abstention.add(p, expected)
    assert pairs and abstention.result() == ref_abstention(pairs)


def with_changes(o: RowOutcome, counterfactual: bool, authority: str | float | None) -> RowOutcome:
    """The outcome with its golden block marked counterfactual and/or every context's authority."""
    row = o.row
    update: dict[str, Any] = {}
    if counterfactual and row.golden is not None:
        update["golden"] = row.golden.model_copy(update={"counterfactual_of": "x"})
    if authority != "keep":
        update["contexts"] = [c.model_copy(update={"authority": authority}) for c in row.contexts]
    return dataclasses.replace(o, row=row.model_copy(update=update))


def test_authority_keeps_the_first_50_ids_and_counts_all() -> None:
    rows = [with_changes(o, False, "forum") for o in outcomes("golden-fixture")] * 2
    got = accumulate(rows, DEFAULT_KS, ()).result().authority
    assert got is not None and got.supported_only_by_low_authority > 50
    assert got == ref_authority(rows)


def test_golden_accumulator_memory_does_not_grow_with_rows() -> None:
    rows = [with_changes(o, i % 2 == 0, "forum") for i, o in enumerate(outcomes("golden-fixture"))]
    once = len(pickle.dumps(accumulate(rows, DEFAULT_KS, ("docType",))))
    twenty = len(pickle.dumps(accumulate(rows * 20, DEFAULT_KS, ("docType",))))
    assert twenty < 1.2 * once  # per-row data would make it about 20 times larger


POOL = outcomes("golden-fixture") + outcomes("rag-fixture") + outcomes("claims-fixture")


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(POOL),
            st.booleans(),
            st.sampled_from(["keep", None, "forum", "official", 0.3, 0.9]),
        ),
        max_size=90,
    ),
    st.lists(st.sampled_from([1, 2, 3, 5, 10]), min_size=1, max_size=4),
    st.lists(st.sampled_from(["docType", "topic", "owner.team"]), max_size=2),
)
def test_golden_accumulator_equals_the_list_based_sections_on_random_rows(
    picks: list[tuple[RowOutcome, bool, str | float | None]], ks: list[int], slice_by: list[str]
) -> None:
    rows = [with_changes(o, cf, authority) for o, cf, authority in picks]
    assert accumulate(rows, ks, slice_by).result() == ref_golden_sections(rows, ks, slice_by)


CLAIM_ROWS = claim_inputs(outcomes("claims-fixture"))


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.sampled_from(CLAIM_ROWS), max_size=40),
    st.lists(st.sampled_from(["topic", "type", "difficulty"]), max_size=2),
)
def test_claim_accumulator_equals_the_list_based_metrics(
    rows: list[ClaimRowInput], extra: list[str]
) -> None:
    total = ClaimMetricsAccumulator("provided", "context", extra)
    for item in rows:
        total.add(item)
    assert total.result() == ref_claim_metrics(rows, "provided", "context", extra)


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
