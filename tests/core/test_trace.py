"""Multi-step traces: the model, one request per judged step, and the verdicts (§8)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from ragbatch.core import (
    GenerationJudgments,
    Judgments,
    RetrievalJudgments,
    StepJudgments,
    Thresholds,
    Trace,
    diagnose,
    diagnose_trace,
    read_step_judgments,
    request_key,
    step_mock_probability,
    step_requests,
    turns_of,
)
from ragbatch.core._trace import HopRetrieval


def hop(query: str, *ids: str, **mock: Any) -> dict[str, Any]:
    step: dict[str, Any] = {
        "kind": "retrieval",
        "query": query,
        "contexts": [{"id": i, "text": f"text of {i}"} for i in ids],
    }
    if mock:
        step["mock"] = {"retrieval": mock}
    return step


def answer(text: str, **mock: Any) -> dict[str, Any]:
    step: dict[str, Any] = {"kind": "answer", "text": text}
    if mock:
        step["mock"] = {"generation": mock}
    return step


def user(text: str) -> dict[str, Any]:
    return {"kind": "user", "text": text}


GOOD_HOP = {"sufficiency": 0.9, "conflict": 0.05}
GOOD_ANSWER = {"relevance": 0.95, "groundedness": 0.9, "contradiction": 0.05}
UNGROUNDED = {"relevance": 0.95, "groundedness": 0.1, "contradiction": 0.3}


def good_hop(query: str, *ids: str) -> dict[str, Any]:
    return hop(query, *ids, chunkRelevance=dict.fromkeys(ids, 0.9), **GOOD_HOP)


def missed_hop(query: str, *ids: str) -> dict[str, Any]:
    return hop(query, *ids, chunkRelevance=dict.fromkeys(ids, 0.05), **GOOD_HOP)


def trace(*steps: dict[str, Any], **extra: Any) -> Trace:
    return Trace.model_validate({"id": "t", "steps": list(steps), **extra})


def mocked(t: Trace) -> dict[int, StepJudgments]:
    """Each judged step's judgments as the mock provider answers them, through the requests."""
    out = {}
    for request in step_requests(t, "jev-1"):
        answers = {q: step_mock_probability(t, request.step, q) for q in request.request.questions}
        assert all(a is not None for a in answers.values()), (request.step, answers)
        out[request.step] = read_step_judgments(t, request.step, answers)  # type: ignore[arg-type]
    return out


def verdict_of(t: Trace, routing: str = "showcase") -> tuple[str, int | None, list[int]]:
    v = diagnose_trace(t, mocked(t), Thresholds(routing=routing))  # type: ignore[arg-type]
    return v.diagnosis, v.first_failing_step, [s.step for s in v.steps if s.recovered]


# -- the scenarios of the issue, with known truth ---------------------------------------------


def test_two_hops_both_fine_pass() -> None:
    t = trace(
        user("Which plan has SSO, and what does it cost?"),
        good_hop("plans with SSO", "plans"),
        good_hop("enterprise plan price", "prices"),
        answer("The Enterprise plan has SSO; it costs $40 a seat.", **GOOD_ANSWER),
    )
    assert verdict_of(t) == ("PASS", None, [])
    assert verdict_of(t, "guarded") == ("PASS", None, [])


def test_second_hop_misses_and_the_answer_says_what_only_it_could_support() -> None:
    t = trace(
        user("Which plan has SSO, and what does it cost?"),
        good_hop("plans with SSO", "plans"),
        missed_hop("enterprise plan price", "blog"),
        answer("The Enterprise plan has SSO; it costs $40 a seat.", **UNGROUNDED),
    )
    assert verdict_of(t) == ("RETRIEVAL_MISS", 2, [])


def test_a_missed_hop_recovered_by_a_later_one_does_not_fail_the_trace() -> None:
    t = trace(
        user("How do I rotate an API key?"),
        missed_hop("rotate key", "changelog"),
        good_hop("API key rotation settings page", "keys-doc"),
        answer("Open Settings > API keys and press Rotate.", **GOOD_ANSWER),
    )
    v = diagnose_trace(t, mocked(t), Thresholds())
    assert (v.diagnosis, v.first_failing_step, v.wasted_hops) == ("PASS", None, 1)
    assert [(s.step, s.verdict.diagnosis, s.recovered) for s in v.steps] == [
        (1, "RETRIEVAL_MISS", True),
        (2, "PASS", False),
        (3, "PASS", False),
    ]


def test_a_recovered_hop_still_fails_when_the_answer_is_not_grounded() -> None:
    t = trace(
        user("How do I rotate an API key?"),
        missed_hop("rotate key", "changelog"),
        good_hop("API key rotation settings page", "keys-doc"),
        answer("Email support to rotate it.", **UNGROUNDED),
    )
    assert verdict_of(t) == ("RETRIEVAL_MISS", 1, [])


def test_three_turns_whose_second_answer_contradicts_its_documents() -> None:
    t = trace(
        user("What is the return window?"),
        good_hop("return window", "returns"),
        answer("30 days.", **GOOD_ANSWER),
        user("Could I get store credit instead?"),
        good_hop("store credit returns", "credit"),
        answer("No, refunds only.", relevance=0.9, groundedness=0.3, contradiction=0.95),
        user("Thanks"),
        good_hop("thanks", "returns"),
        answer("You're welcome.", **GOOD_ANSWER),
    )
    assert verdict_of(t) == ("GENERATOR_UNGROUNDED", 5, [])
    assert [turn.answers for turn in turns_of(t)] == [(2,), (5,), (8,)]


def test_a_follow_up_whose_retrieval_misses() -> None:
    t = trace(
        user("Do you ship to Norway?"),
        good_hop("shipping Norway", "ship"),
        answer("Yes, we ship to Norway.", **GOOD_ANSWER),
        user("And how long does that take?"),
        missed_hop("how long does that take", "faq-general"),
        answer("It takes a while.", relevance=0.6, groundedness=0.5, contradiction=0.1),
    )
    assert verdict_of(t) == ("RETRIEVAL_MISS", 4, [])
    assert verdict_of(t, "guarded") == ("RETRIEVAL_MISS", 4, [])


def test_a_tool_call_between_hops_is_not_judged() -> None:
    t = trace(
        user("Where is order 42, and can I return it?"),
        good_hop("order tracking", "tracking"),
        {"kind": "tool", "name": "lookup_order", "input": {"id": 42}, "output": "shipped"},
        good_hop("return policy", "returns"),
        answer("It has shipped; you can return it within 30 days.", **GOOD_ANSWER),
    )
    v = diagnose_trace(t, mocked(t), Thresholds())
    assert v.diagnosis == "PASS"
    assert [s.step for s in v.steps] == [1, 3, 4]
    assert [r.step for r in step_requests(t, "m")] == [1, 3, 4]


def test_an_answer_with_no_retrieval_is_its_own_finding() -> None:
    t = trace(user("What is our refund policy?"), answer("Refunds take 5 days.", **GOOD_ANSWER))
    v = diagnose_trace(t, mocked(t), Thresholds())
    assert (v.diagnosis, v.confidence, v.first_failing_step) == ("RETRIEVAL_MISS", 1.0, 1)
    assert v.steps[0].no_retrieval


def test_an_uncertain_step_sends_the_trace_to_the_fallback() -> None:
    t = trace(
        user("q"),
        good_hop("q", "a"),
        answer("x", relevance=0.5, groundedness=0.9, contradiction=0.05),
        user("q2"),
        missed_hop("q2", "b"),
        answer("y", **UNGROUNDED),
    )
    # showcase: a confident failure anywhere wins over an earlier uncertainty
    assert verdict_of(t) == ("RETRIEVAL_MISS", 4, [])
    # guarded: the walk stops at the first step that is not a confident PASS
    v = diagnose_trace(t, mocked(t), Thresholds(routing="guarded"))
    assert (v.diagnosis, v.route, v.deciding_step, v.first_failing_step) == (
        "JUDGE_UNCERTAIN",
        "fallback",
        2,
        None,
    )


# -- a trace of one hop and one answer is the row made of them --------------------------------

p = st.floats(0.0, 1.0)


@settings(max_examples=400, deadline=None)
@given(
    chunks=st.lists(p, max_size=3),
    sufficiency=p,
    conflict=p,
    relevance=p,
    grounded=p,
    contradiction=p,
    correctness=st.none() | p,
    routing=st.sampled_from(["showcase", "guarded"]),
)
def test_one_hop_trace_agrees_with_the_row_table(
    chunks: list[float],
    sufficiency: float,
    conflict: float,
    relevance: float,
    grounded: float,
    contradiction: float,
    correctness: float | None,
    routing: str,
) -> None:
    relevance_of = {f"c{i}": v for i, v in enumerate(chunks)}
    retrieval = RetrievalJudgments(
        chunk_relevance=relevance_of, sufficiency=sufficiency, conflict=conflict
    )
    generation = GenerationJudgments(
        relevance=relevance,
        groundedness=grounded,
        contradiction=contradiction,
        correctness=correctness,
    )
    thresholds = Thresholds(routing=routing)  # type: ignore[arg-type]
    row = diagnose(Judgments(retrieval=retrieval, generation=generation), thresholds)
    t = trace(user("q"), hop("q", *relevance_of), answer("a"))
    judged = {
        1: StepJudgments(
            retrieval=HopRetrieval(
                chunk_relevance=relevance_of, sufficiency=sufficiency, conflict=conflict
            )
        ),
        2: StepJudgments(generation=generation),
    }
    v = diagnose_trace(t, judged, thresholds)
    assert (v.diagnosis, v.confidence, v.route) == (row.diagnosis, row.confidence, row.route)


# -- requests: what each judged step is asked, and against which state ------------------------


def test_each_judged_step_sees_the_conversation_and_its_turns_documents() -> None:
    t = trace(
        user("Do you ship to Norway?"),
        hop("shipping Norway", "ship"),
        answer("Yes."),
        user("And how long does that take?"),
        hop("delivery time Norway", "times"),
        hop("customs delays", "customs", "times"),
        answer("3-5 days."),
        referenceAnswer="Three to five working days.",
    )
    requests = step_requests(t, "jev-1")
    assert [(r.step, r.turn, r.decision_id) for r in requests] == [
        (1, 0, "ragbatch.rag-trace.hop"),
        (2, 0, "ragbatch.rag-trace.answer.without-reference"),
        (4, 1, "ragbatch.rag-trace.hop"),
        (5, 1, "ragbatch.rag-trace.hop"),
        (6, 1, "ragbatch.rag-trace.answer.with-reference"),
    ]
    hop2 = requests[3].request
    assert hop2.state["conversation"] == [{"question": "Do you ship to Norway?", "answer": "Yes."}]
    assert hop2.state["question"] == "And how long does that take?"
    assert hop2.state["query"] == "customs delays"
    assert sorted(hop2.questions) == [
        "chunkRelevance:0",
        "chunkRelevance:1",
        "contextConflict",
        "contextSufficiency",
        "queryRelevance:0",
        "queryRelevance:1",
    ]
    final = requests[4].request
    # the turn's documents, each id once, in the order first retrieved; turn 1's are not there
    assert [c["id"] for c in final.state["contexts"]] == ["times", "customs"]
    assert final.state["referenceAnswer"] == "Three to five working days."
    assert sorted(final.questions) == [
        "answerRelevance",
        "contradiction",
        "correctness",
        "groundedness",
    ]
    assert "referenceAnswer" not in requests[1].request.state  # only the final answer's


def test_a_step_identical_in_two_traces_asks_the_same_request() -> None:
    first = trace(
        user("q"), hop("q", "a"), answer("x"), user("more?"), hop("more", "b"), answer("y")
    )
    second = Trace.model_validate(
        {"id": "other", "steps": [s.model_dump(by_alias=True) for s in first.steps[:3]]}
        | {"metadata": {"user": "someone else"}}
    )
    keys = [request_key("/v1/decide", r.request) for r in step_requests(first, "m")]
    again = [request_key("/v1/decide", r.request) for r in step_requests(second, "m")]
    assert again == keys[:2]
    assert len(set(keys)) == 4


def test_labels_and_mock_answers_never_reach_a_state() -> None:
    t = trace(
        user("q"),
        {**good_hop("q", "a"), "expected": {"diagnosis": "PASS"}},
        {**answer("x", **GOOD_ANSWER), "expected": {"diagnosis": "PASS"}},
        expected={"diagnosis": "PASS", "firstFailingStep": None},
        metadata={"secret": "label-ish"},
    )
    for r in step_requests(t, "m"):
        text = str(r.request.state)
        assert "label-ish" not in text and "0.9" not in text and "PASS" not in text


# -- the model refuses what cannot be judged ---------------------------------------------------


@pytest.mark.parametrize(
    ("steps", "message"),
    [
        ([], "a trace needs at least one step"),
        ([hop("q", "a"), answer("x")], "steps[0]: a trace starts with a user step"),
        ([user("q"), hop("q", "a")], "steps[0]: the turn this user step starts has no answer"),
        ([user("q"), answer("x"), user("again")], "steps[2]: the turn this user step starts"),
        ([user("q"), hop("q", "a", "a"), answer("x")], "duplicate context id 'a'"),
        (
            [user("q"), hop("q", "a", chunkRelevance={"zz": 0.5}), answer("x")],
            "steps[1].mock.retrieval.chunkRelevance: 'zz' is not a context id",
        ),
        ([user("q"), {"kind": "thought", "text": "hm"}, answer("x")], "does not match any of"),
    ],
)
def test_a_trace_that_cannot_be_judged_is_refused(steps: list[Any], message: str) -> None:
    with pytest.raises(ValidationError, match=None) as caught:
        trace(*steps)
    assert message in str(caught.value)


def test_first_failing_step_null_is_a_label_and_absent_is_none() -> None:
    labelled = trace(user("q"), answer("x"), expected={"firstFailingStep": None})
    unlabelled = trace(user("q"), answer("x"), expected={"diagnosis": "PASS"})
    assert labelled.expected is not None and labelled.expected.labels_first_failing_step
    assert unlabelled.expected is not None and not unlabelled.expected.labels_first_failing_step
    with pytest.raises(ValidationError, match="firstFailingStep: 5 is not a step index"):
        trace(user("q"), answer("x"), expected={"firstFailingStep": 5})
