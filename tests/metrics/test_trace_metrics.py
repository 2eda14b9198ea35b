"""The ``traces`` section (docs/semantics.md §8a): where traces fail by step kind, hop position
and turn, wasted hops, answers with no retrieval, hops and turns per trace, the first failing
step against its labels and steps against their own labels; the same for any row order."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from ragbatch.core import AnswerStep, RetrievalStep, RowOutcome, Thresholds, count_hops, turns_of
from ragbatch.metrics import (
    TraceMetrics,
    TraceMetricsAccumulator,
    first_failing_step_match,
    hops_bucket,
    turns_bucket,
)
from ragbatch.metrics._golden import _slice_item
from tests.metrics.trace_outcomes import (
    answer,
    committed,
    committed_traces,
    failed_outcome,
    hop,
    outcome,
    trace_of,
    user,
)


def section(outcomes: list[RowOutcome]) -> TraceMetrics:
    acc = TraceMetricsAccumulator()
    for o in outcomes:
        acc.add(o)
    result = acc.result()
    assert result is not None
    return result


def test_a_run_of_rows_alone_has_no_traces_section() -> None:
    assert TraceMetricsAccumulator().result() is None


def test_the_committed_traces_fail_where_their_labels_say() -> None:
    traces = committed_traces()
    t = section(committed())
    assert (t.version, t.traces, t.judged, t.failures) == ("1", len(traces), len(traces), 0)
    # the first failing step of every labelled failing trace, by its kind and diagnosis
    want: dict[str, Counter[str]] = {"retrieval": Counter(), "answer": Counter()}
    for trace in traces:
        assert trace.expected is not None
        first = trace.expected.first_failing_step
        if first is not None:
            kind = "retrieval" if isinstance(trace.steps[first], RetrievalStep) else "answer"
            want[kind][str(trace.expected.diagnosis)] += 1
    got = {k: dict(v.by_diagnosis) for k, v in t.first_failing_step.by_kind.items()}
    assert got == {k: dict(v) for k, v in want.items()}
    assert t.first_failing_step.traces == sum(sum(c.values()) for c in want.values())
    # "answer-without-retrieval" is the one answer given with no retrieval
    assert (t.first_failing_step.no_retrieval, t.no_retrieval.no_retrieval) == (1, 1)
    assert (t.wasted_hops.wasted, t.wasted_hops.traces) == (1, 1)  # "recovered-hop"
    assert t.wasted_hops.hops == sum(h.judged for h in t.by_hop_position)
    hops = Counter(count_hops(trace) for trace in traces)
    assert t.hops_per_trace.counts == {str(k): hops[k] for k in sorted(hops)}
    assert t.hops_per_trace.mean == sum(count_hops(x) for x in traces) / len(traces)
    turns = Counter(len(turns_of(trace)) for trace in traces)
    assert t.turns_per_trace.counts == {str(k): turns[k] for k in sorted(turns)}
    assert t.turns_per_trace.max == max(turns)
    # every decided trace's step is its label; "final-answer-uncertain" goes to the fallback
    a = t.first_failing_step_accuracy
    assert a is not None
    assert (a.labelled, a.judged, a.correct, a.uncertain) == (8, 8, 7, 1)
    assert (a.too_early, a.too_late, a.accuracy) == (0, 0, 7 / 8)
    # steps: the judge calls the "thanks" hop relevant, its label says it missed
    assert t.steps is not None
    retrieval, answers = t.steps.classification["retrieval"], t.steps.classification["answer"]
    labelled = Counter(
        "retrieval" if isinstance(s, RetrievalStep) else "answer"
        for trace in traces
        for s in trace.steps
        if isinstance(s, RetrievalStep | AnswerStep) and s.expected is not None
    )
    assert (retrieval.rows, answers.rows) == (labelled["retrieval"], labelled["answer"])
    assert (retrieval.correct, answers.correct) == (labelled["retrieval"] - 1, labelled["answer"])


def test_hop_positions_turns_recovery_and_an_answer_without_retrieval() -> None:
    # turn 0: the first hop misses, the second finds it and the answer is grounded (the first
    # is recovered); turn 1: answered with no retrieval, the trace's first failing step
    trace = trace_of("a", [user(), hop(0.05, 0.08), hop(0.93), answer(), user(), answer()])
    t = section([outcome(trace)])
    first, second = t.by_hop_position
    assert (first.hop, first.judged, first.failed, first.recovered, first.first_failing) == (
        0, 1, 1, 1, 0)  # fmt: skip
    assert (second.hop, second.judged, second.passed, second.failure_rate) == (1, 1, 1, 0.0)
    turn0, turn1 = t.by_turn
    assert (turn0.turn, turn0.traces, turn0.retrieval.judged, turn0.retrieval.failed) == (
        0,
        1,
        2,
        1,
    )
    assert (turn0.answer.judged, turn0.answer.failed, turn0.answer.first_failing) == (1, 0, 0)
    assert (turn1.turn, turn1.retrieval.judged, turn1.answer.failed) == (1, 0, 1)
    assert turn1.answer.first_failing == 1
    assert t.first_failing_step.by_kind["answer"].by_diagnosis == {"RETRIEVAL_MISS": 1}
    assert (t.first_failing_step.no_retrieval, t.first_failing_step.rate) == (1, 1.0)
    assert (t.wasted_hops.hops, t.wasted_hops.wasted, t.wasted_hops.rate) == (2, 1, 0.5)
    assert (t.no_retrieval.answers, t.no_retrieval.no_retrieval, t.no_retrieval.rate) == (
        2, 1, 0.5)  # fmt: skip
    assert t.first_failing_step_accuracy is None and t.steps is None


def test_the_first_failing_step_against_its_label_early_late_uncertain() -> None:
    missed = [user(), hop(0.05, 0.08), hop(0.93), answer(0.12)]  # fails at step 1
    passes = [user(), hop(0.93), answer()]
    ungrounded = [user(), hop(0.93), answer(0.12)]  # fails at step 2
    unsure = [user(), hop(0.93), answer(0.5)]  # groundedness in the band
    cases = [
        trace_of("early", missed, {"firstFailingStep": 2}),
        trace_of("false-alarm", missed, {"firstFailingStep": None}),
        trace_of("missed", passes, {"firstFailingStep": 1}),
        trace_of("late", ungrounded, {"firstFailingStep": 1}),
        trace_of("unsure", unsure, {"firstFailingStep": None}),
        trace_of("right", passes, {"firstFailingStep": None}),
        trace_of("unlabelled", missed, {"diagnosis": "RETRIEVAL_MISS"}),
    ]
    outcomes = [outcome(trace, i) for i, trace in enumerate(cases)]
    broken = trace_of("broken", missed, {"firstFailingStep": 1})
    outcomes.append(failed_outcome(broken, len(cases)))
    a = section(outcomes).first_failing_step_accuracy
    assert a is not None
    assert (a.labelled, a.judged, a.correct) == (7, 6, 1)
    assert (a.too_early, a.too_late, a.uncertain) == (2, 2, 1)
    assert (a.accuracy, a.overall_accuracy) == (1 / 6, 1 / 7)
    matches = [o.jev.trace and first_failing_step_match(o.jev.trace) for o in outcomes]
    assert matches == [False, False, False, False, False, True, None, None]


def test_a_failed_trace_counts_its_size_and_no_verdict() -> None:
    trace = trace_of("f", [user(), hop(0.9), answer()])
    t = section([failed_outcome(trace)])
    assert (t.traces, t.judged, t.failures, t.passed) == (1, 0, 1, 0)
    assert t.hops_per_trace.counts == {"1": 1} and t.by_hop_position == []
    assert (t.first_failing_step.traces, t.first_failing_step.rate) == (0, 0.0)


def test_steps_against_their_own_labels_and_their_judgments() -> None:
    steps = [
        user(),
        hop(0.05, 0.08, diagnosis="RETRIEVAL_MISS",
            retrieval={"chunkRelevance": {"c": False}, "contextSufficiency": False}),
        hop(0.93, diagnosis="RETRIEVAL_MISS", retrieval={"chunkRelevance": {"c": False}}),
        answer(diagnosis="PASS", generation={"groundedness": True}),
    ]  # fmt: skip
    t = section([outcome(trace_of("s", steps))])
    assert t.steps is not None
    hops, answers = t.steps.classification["retrieval"], t.steps.classification["answer"]
    assert (hops.rows, hops.correct, hops.confusion.labels) == (2, 1, ["RETRIEVAL_MISS", "PASS"])
    assert (answers.rows, answers.correct) == (1, 1)
    chunk = t.steps.components["retrieval"]["chunkRelevance"]
    # p = 0.05 against false (right), p = 0.93 against false (wrong)
    assert (chunk.count, chunk.accuracy, chunk.positives, chunk.predicted_positives) == (
        2, 0.5, 0, 1)  # fmt: skip
    assert chunk.brier == (0.05**2 + 0.93**2) / 2
    assert t.steps.components["retrieval"]["contextSufficiency"].count == 1
    assert t.steps.components["answer"]["groundedness"].accuracy == 1.0
    assert t.steps.components["answer"]["correctness"].count == 0


def _without_label_order(t: TraceMetrics) -> dict[str, object]:
    data = t.model_dump()
    for c in (data.get("steps") or {}).get("classification", {}).values():
        c["per_label"] = sorted(c["per_label"].items())
        c.pop("confusion")
    return data


ALL = [
    *committed(),
    outcome(trace_of("x", [user(), hop(0.05, 0.08), hop(0.93), answer(), user(), answer()]), 9),
    failed_outcome(trace_of("y", [user(), hop(0.9), answer()]), 10),
]


@settings(max_examples=40, deadline=None)
@given(st.permutations(ALL))
def test_the_same_section_for_any_row_order(order: list[RowOutcome]) -> None:
    assert _without_label_order(section(order)) == _without_label_order(section(ALL))


def test_rates_lie_in_zero_one_and_guarded_routing_too() -> None:
    guarded = Thresholds(routing="guarded")
    t = section([outcome(trace, i, guarded) for i, trace in enumerate(committed_traces())])
    rates = [t.first_failing_step.rate, t.wasted_hops.rate, t.no_retrieval.rate]
    rates += [h.failure_rate for h in t.by_hop_position]
    assert all(0.0 <= r <= 1.0 for r in rates)
    assert t.passed + t.uncertain + t.first_failing_step.traces == t.judged


def test_hops_and_turns_buckets() -> None:
    assert [hops_bucket(n) for n in (0, 1, 2, 3, 4, 6, 7, 40)] == [
        "0", "1", "2", "3", "4-6", "4-6", "7+", "7+"]  # fmt: skip
    assert [turns_bucket(n) for n in (1, 2, 3, 4, 6, 7)] == ["1", "2", "3", "4-6", "4-6", "7+"]


def test_a_trace_is_sliced_by_hops_and_turns_a_row_is_not() -> None:
    trace = trace_of("t", [user(), hop(0.9), hop(0.9), answer(), user(), hop(0.9), answer()])
    keys = _slice_item(outcome(trace), None, None, "10", ()).keys
    assert (keys["hops"], keys["turns"]) == ("3", "2")
    assert list(keys)[:5] == ["queryLength", "contextCount", "nearDuplicateTop3", "hops", "turns"]
    row = outcome(trace)
    as_row = RowOutcome(0, row.row, row.decision, row.jev.__class__(None, None, None, None, 0.0),
                        row.baseline)  # fmt: skip
    assert "hops" not in _slice_item(as_row, None, None, "10", ()).keys
