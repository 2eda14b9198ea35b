"""Calibration on multi-step traces (docs/semantics.md §5, §8): a trace is re-diagnosed by
the trace policy from its steps' recorded answers, counting is exact on traces and rows mixed,
the certified bound holds on held-out traces, and a mixed report calibrates both."""

from __future__ import annotations

import random
from typing import Any

import pytest

from ragbatch.calibrate._bounds import upper_bound
from ragbatch.calibrate._fit import calibrate, thresholds_of
from ragbatch.calibrate._labelled import labelled
from ragbatch.calibrate._ladder import count_one, pairs, tally, thresholds
from ragbatch.calibrate._policy_file import PolicyFile
from ragbatch.calibrate._refine import Sample, counts_over_move, statuses_of
from ragbatch.calibrate._rules import DECIDE, JUDGMENTS, in_order, rediagnose, uniform
from ragbatch.calibrate._search import count, counts_over_pass
from ragbatch.core import ConfigError, Thresholds, Trace, diagnose_trace, routing_of
from tests.calibrate.test_calibrate import random_samples, synthetic
from tests.calibrate.trace_synth import mock_judgments, report_rows, synthetic_traces

GRID = [round(0.1 * i, 1) for i in range(11)]


def samples_of(rows: list[dict[str, Any]]) -> list[Sample]:
    return [Sample(r.signals, r.expected, r.trace) for r in labelled(rows)]


def policy_thresholds(pairs_: dict[str, tuple[float, float]], routing: str) -> Thresholds:
    per = tuple((name, *pair) for name, pair in pairs_.items())
    return Thresholds(0.2, 0.8, per, routing_of(routing))


def random_pairs(rng: random.Random) -> dict[str, tuple[float, float]]:
    out = {}
    for name in JUDGMENTS:
        fail, pass_ = sorted(rng.sample(GRID, 2))
        out[name] = (fail, pass_)
    return out


# -- a trace is diagnosed by the trace policy ---------------------------------------------------


def test_the_search_diagnoses_a_trace_as_the_trace_policy_does() -> None:
    # Answers on a 0.1 grid meet the thresholds exactly (both are inclusive); per-judgment
    # pairs; every shape of the generator: hops without documents, answers without
    # retrieval, two answers in a turn (recovered hops per segment), hops no verdict reads.
    rng = random.Random(11)
    traces = synthetic_traces(400, seed=11, coarse=True)
    samples = samples_of(report_rows(traces))
    configs = [uniform(f, p) for f, p in ((0.2, 0.8), (0.0, 1.0), (0.1, 0.9), (0.5, 0.6))]
    configs += [random_pairs(rng) for _ in range(8)]
    checked = set()
    for trace, sample in zip(traces, samples, strict=True):
        assert sample.trace is not None
        judgments = mock_judgments(trace)
        for pairs_ in configs:
            for routing, rule in DECIDE.items():
                want = diagnose_trace(trace, judgments, policy_thresholds(pairs_, routing))
                got = sample.trace.rule(rule)(statuses_of(sample, in_order(pairs_)))
                assert got == want.diagnosis, (trace.id, pairs_, routing)
                checked.add((routing, got, want.wasted_hops > 0))
    # the cases that matter were met: every diagnosis in both routings, recovered hops
    assert {d for _, d, _ in checked} >= {"PASS", "JUDGE_UNCERTAIN", "RETRIEVAL_MISS"}
    assert len({d for _, d, _ in checked}) == 8
    assert any(recovered for _, _, recovered in checked)


def test_a_trace_of_one_hop_and_one_answer_counts_as_its_row() -> None:
    # §8's consistency with rows, through calibration: such a trace is re-diagnosed as the
    # row made of the same answers.
    traces = [t for t in synthetic_traces(400, seed=4, coarse=True) if _is_simple(t)]
    assert len(traces) >= 20
    for trace, sample in zip(traces, samples_of(report_rows(traces)), strict=True):
        hop, answer = mock_judgments(trace).values()
        row = {
            "retrieval": hop.retrieval.model_dump(by_alias=True, exclude={"query_relevance"}),
            "generation": answer.generation.model_dump(by_alias=True, exclude_none=True),
        }
        for routing, rule in DECIDE.items():
            for f, p in ((0.2, 0.8), (0.3, 0.7)):
                assert sample.trace is not None
                got = sample.trace.rule(rule)(statuses_of(sample, in_order(uniform(f, p))))
                assert got == rediagnose(row, uniform(f, p), routing)[0]


def _is_simple(trace: Trace) -> bool:
    kinds = [s.kind for s in trace.steps]
    hop = trace.steps[1] if len(kinds) > 1 else None
    return kinds == ["user", "retrieval", "answer"] and bool(getattr(hop, "contexts", None))


# -- counting is exact on traces and rows mixed -------------------------------------------------


@pytest.fixture(scope="module")
def mixed() -> list[Sample]:
    rows = random_samples(random.Random(3), 200)
    traces = samples_of(report_rows(synthetic_traces(300, seed=3, coarse=True)))
    out = rows + traces
    random.Random(5).shuffle(out)
    return out


def test_the_ladder_tally_counts_traces_like_a_direct_count(mixed: list[Sample]) -> None:
    steps = pairs()
    for routing in ("guarded", "showcase"):
        counted = tally(mixed, steps, routing)
        for i in range(0, len(steps), 5):
            assert counted[i] == count_one(mixed, thresholds(steps[i]), routing)


def test_the_pass_sweep_counts_traces_like_a_direct_count(mixed: list[Sample]) -> None:
    passes = [0.05, 0.1, 0.2, 0.25, 0.5, 0.7, 0.8, 0.9, 0.95, 1.0]
    for fail in (0.0, 0.1, 0.2, 0.5, 0.8):
        above = [p for p in passes if p > fail]
        swept = counts_over_pass(mixed, fail, above)
        assert swept == [count(mixed, uniform(fail, p)) for p in above]


def test_the_move_counts_traces_like_a_direct_count(mixed: list[Sample]) -> None:
    rng = random.Random(6)
    for routing, rule in DECIDE.items():
        start = {name: rng.choice([(0.1, 0.9), (0.2, 0.8), (0.0, 1.0)]) for name in JUDGMENTS}
        table = [statuses_of(s, in_order(start)) for s in mixed]
        for name in JUDGMENTS:
            fail, pass_ = start[name]
            for side, values in ((0, [0.0, 0.05, 0.1, 0.3, 0.5]), (1, [0.6, 0.8, 0.9, 1.0])):
                values = [v for v in values if (v < pass_ if side == 0 else v > fail)]
                got = counts_over_move(mixed, table, start, name, side, values, rule)
                want = [
                    count(mixed, {**start, name: (v, pass_) if side == 0 else (fail, v)}, rule)
                    for v in values
                ]
                assert got == want, (routing, name, side)


# -- the promise holds on traces the fit never saw ----------------------------------------------


def fresh_risk(policy: PolicyFile, traces: list[Trace]) -> tuple[int, int]:
    """(automatic traces, wrong ones) when ``ragbatch run`` applies the policy: the trace
    policy itself, with the policy's thresholds and routing."""
    t = policy_thresholds(thresholds_of(policy), policy.routing)
    auto = wrong = 0
    for trace in traces:
        verdict = diagnose_trace(trace, mock_judgments(trace), t)
        if verdict.route == "auto":
            assert trace.expected is not None
            auto, wrong = auto + 1, wrong + (verdict.diagnosis != trace.expected.diagnosis)
    return auto, wrong


@pytest.mark.parametrize("seed", range(4))
def test_the_certified_bound_holds_on_held_out_traces(seed: int) -> None:
    traces = synthetic_traces(3000, seed=100 + seed)
    fit, fresh = traces[:2000], traces[2000:]
    policy = calibrate(report_rows(fit), 0.10, 0.95, folds=5, seed=seed)
    g = policy.guarantee
    assert g is not None and g.certified_on == 2000 and g.estimated_risk <= g.target_risk
    auto, wrong = fresh_risk(policy, fresh)
    assert auto / len(fresh) >= 0.2  # the trace policy automates a share of them
    # 1,000 fresh traces estimate the risk with noise: they must not refute the target
    # (their 99 % lower bound is within it), as for rows.
    assert 1.0 - upper_bound(auto - wrong, auto, 0.99) <= g.target_risk
    assert abs(auto / len(fresh) - g.estimated_coverage) < 0.05


def test_a_trace_label_the_policy_cannot_see_is_not_certified_away() -> None:
    # Traces whose labels disagree with every step's answers half the time: nothing can be
    # automated at 5 %, and calibration refuses instead of certifying.
    traces = synthetic_traces(600, seed=7)
    rows = report_rows(traces)
    rng = random.Random(7)
    for row in rows:
        if rng.random() < 0.5:
            row["expected"] = "PASS" if row["expected"] != "PASS" else "RETRIEVAL_MISS"
    with pytest.raises(ConfigError, match="no threshold"):
        calibrate(rows, 0.05, 0.95, folds=2)


# -- a mixed report -----------------------------------------------------------------------------


def test_a_mixed_report_calibrates_rows_and_traces_each_by_its_own_policy() -> None:
    rows = synthetic(1000, seed=12)
    traces = synthetic_traces(1000, seed=12)
    mixed = rows + report_rows(traces)
    random.Random(12).shuffle(mixed)
    policy = calibrate(mixed, 0.10, 0.95, folds=3)
    g = policy.guarantee
    assert g is not None and g.certified_on == 2000 and policy.fitted_on.labelled_rows == 2000
    # The certificate's counts are the rows' (row table) plus the traces' (trace policy).
    pairs_ = thresholds_of(policy)
    row_auto = row_wrong = 0
    for row in rows:
        diagnosis, route = rediagnose(row, pairs_, policy.routing)
        row_auto += route == "auto"
        row_wrong += route == "auto" and diagnosis != row["expected"]
    trace_auto, trace_wrong = fresh_risk(policy, traces)
    assert (g.auto_rows, g.errors) == (row_auto + trace_auto, row_wrong + trace_wrong)
    assert row_auto > 0 and trace_auto > 0
    assert sum(d.auto_rows for d in g.per_diagnosis) == g.auto_rows
    # not the policy of the rows alone: the traces were counted
    alone = calibrate(rows, 0.10, 0.95, folds=3)
    assert alone.fitted_on.rows_sha256 != policy.fitted_on.rows_sha256


def test_step_labels_feed_the_per_judgment_estimates_only() -> None:
    traces = synthetic_traces(400, seed=9)
    rows = report_rows(traces)
    policy = calibrate(rows, 0.2, 0.95, folds=2)
    hops = sum(1 for r in rows for s in r["steps"] if s["kind"] == "retrieval" and "expected" in s)
    sufficiency = policy.judgments["contextSufficiency"]
    assert 0 < sufficiency.labelled_rows <= hops
    unlabelled = [
        {**r, "steps": [{k: v for k, v in s.items() if k != "expected"} for s in r["steps"]]}
        for r in rows
    ]
    bare = calibrate(unlabelled, 0.2, 0.95, folds=2)
    assert bare.judgments["contextSufficiency"].labelled_rows == 0
    assert bare.guarantee == policy.guarantee  # the guarantee reads the traces' labels only
