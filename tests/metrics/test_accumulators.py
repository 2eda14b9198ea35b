"""The streaming accumulators equal the list-based computations they replace.

Each accumulator is checked against an independent computation: the committed reports (made by
the list-based code), and the old list-based formulas kept as references
(tests/metrics/list_references.py), on the bundled fixtures and on random rows (the single
pieces on random inputs: test_accumulator_pieces.py).
"""

from __future__ import annotations

import dataclasses
import functools
import pickle
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragbatch.core._claims import EXTRACTORS
from ragbatch.core._outcome import RowOutcome
from ragbatch.data._jsonl import JsonlReader
from ragbatch.metrics._answer_checks import AbstentionAccumulator, ChecksAccumulator
from ragbatch.metrics._claims import ClaimMetricsAccumulator, ClaimRowInput
from ragbatch.metrics._golden import GoldenAccumulator, GoldenSections, row_check, row_ranking
from ragbatch.metrics._ranking import DEFAULT_KS, RankingAccumulator
from ragbatch.providers._baseline import RecordedBaseline
from ragbatch.providers._mock import MockProvider
from ragbatch.run._runner import ClaimConfig, RunConfig, run_batch
from tests.metrics.list_references import (
    ref_abstention,
    ref_authority,
    ref_checks,
    ref_claim_metrics,
    ref_golden_sections,
    ref_ranking,
)

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
