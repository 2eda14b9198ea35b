"""Wire: reply validation against the request that was sent (jev-api.md, Response body)."""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Callable
from typing import Any

import orjson
import pytest

from ragbatch.core._errors import ProviderError
from ragbatch.core._wire import (
    ChoiceAnswer,
    JevRequest,
    NoulAnswer,
    Question,
    ScoreAnswer,
    WireReply,
    parse_reply,
    request_key,
)

REQUEST = JevRequest(
    model="jev-latest",
    state={"question": "q", "contexts": [], "answer": "a"},
    questions={
        "grounded": Question(
            type="noul", instructions="Supported?", criteria={"true": "yes", "false": "no"}
        ),
        "verdict": Question(
            type="choice",
            instructions="Verdict",
            criteria={"supported": None, "contradicted": "the context disagrees", "unknown": None},
        ),
        "quality": Question(type="score", instructions="Quality", criteria=["bad", "ok", "good"]),
    },
)


def valid_reply() -> dict[str, Any]:
    return {
        "model": "jev-1.13.0",
        "answers": {
            "grounded": {"type": "noul", "noul": 0.98},
            "verdict": {
                "type": "choice",
                "choice": "supported",
                "confidence": 0.91,
                "probabilities": {"supported": 0.93, "contradicted": 0.02, "unknown": 0.05},
            },
            "quality": {
                "type": "score",
                "score": 1.7,
                "confidence": 0.9,
                "legend": {"0": "bad", "1": "ok", "2": "good"},
                "probabilities": {"0": 0.1, "1": 0.1, "2": 0.8},
            },
        },
        "usage": {"input_tokens": 521, "output_tokens": 12},
    }


def body_of(mutate: Callable[[dict[str, Any]], object]) -> bytes:
    reply = copy.deepcopy(valid_reply())
    mutate(reply)
    return json.dumps(reply).encode()  # orjson refuses integers past 64 bits


def malformed(body: bytes, request: JevRequest = REQUEST) -> ProviderError:
    with pytest.raises(ProviderError) as info:
        parse_reply(request, body, request_id="req-123")
    error = info.value
    assert error.kind == "malformed-response"
    assert error.request_id == "req-123"
    assert not error.retryable
    assert str(error).startswith("malformed response: ")
    assert str(error).endswith("(request id req-123)")
    return error


# -- accepted -------------------------------------------------------------------------------------


def test_valid_reply_is_parsed() -> None:
    reply = parse_reply(REQUEST, orjson.dumps(valid_reply()))
    assert isinstance(reply, WireReply)
    assert reply.model == "jev-1.13.0"
    assert (reply.usage.input_tokens, reply.usage.output_tokens) == (521, 12)
    grounded, verdict, quality = (reply.answers[k] for k in ("grounded", "verdict", "quality"))
    assert isinstance(grounded, NoulAnswer) and grounded.noul == 0.98
    assert isinstance(verdict, ChoiceAnswer) and verdict.choice == "supported"
    assert isinstance(quality, ScoreAnswer) and quality.probabilities["2"] == 0.8


def test_extra_fields_are_ignored() -> None:
    def add_extras(r: dict[str, Any]) -> None:
        r["usage"]["cost"] = 0.0000219
        r["usage"]["cached_tokens"] = 0
        r["id"] = "resp_1"
        r["created"] = 1767225600
        r["answers"]["grounded"]["explanation"] = None

    reply = parse_reply(REQUEST, body_of(add_extras))
    assert reply == parse_reply(REQUEST, orjson.dumps(valid_reply()))


@pytest.mark.parametrize("p", [0, 0.0, 1, 1.0, 0.5])
def test_noul_bounds_are_inclusive(p: float) -> None:
    body = body_of(lambda r: r["answers"]["grounded"].update(noul=p))
    answer = parse_reply(REQUEST, body).answers["grounded"]
    assert isinstance(answer, NoulAnswer) and answer.noul == p


def test_missing_output_tokens_count_as_zero() -> None:
    reply = parse_reply(REQUEST, body_of(lambda r: r["usage"].pop("output_tokens")))
    assert reply.usage.output_tokens == 0


def test_score_legend_may_be_absent() -> None:
    reply = parse_reply(REQUEST, body_of(lambda r: r["answers"]["quality"].pop("legend")))
    assert isinstance(reply.answers["quality"], ScoreAnswer)


# -- rejected -------------------------------------------------------------------------------------


def test_missing_answer_id() -> None:
    error = malformed(body_of(lambda r: r["answers"].pop("verdict")))
    assert "missing ['verdict']" in str(error)


def test_extra_answer_id() -> None:
    error = malformed(
        body_of(lambda r: r["answers"].update(surprise={"type": "noul", "noul": 0.5}))
    )
    assert "unexpected ['surprise']" in str(error)


def test_renamed_answer_id() -> None:
    def rename(r: dict[str, Any]) -> None:
        r["answers"]["Grounded"] = r["answers"].pop("grounded")

    error = malformed(body_of(rename))
    assert "missing ['grounded']" in str(error) and "unexpected ['Grounded']" in str(error)


def test_answer_of_the_wrong_type() -> None:
    # a well-formed choice answer where a noul was asked
    def swap(r: dict[str, Any]) -> None:
        r["answers"]["grounded"] = r["answers"]["verdict"]

    error = malformed(body_of(swap))
    assert "'grounded' is choice, asked noul" in str(error)


WIRE_BAD: dict[str, Callable[[dict[str, Any]], object]] = {
    "noul-1.5": lambda r: r["answers"]["grounded"].update(noul=1.5),
    "noul-negative": lambda r: r["answers"]["grounded"].update(noul=-0.01),
    "noul-string": lambda r: r["answers"]["grounded"].update(noul="0.9"),
    "noul-bool": lambda r: r["answers"]["grounded"].update(noul=True),
    "noul-null": lambda r: r["answers"]["grounded"].update(noul=None),
    "noul-missing": lambda r: r["answers"]["grounded"].pop("noul"),
    "unknown-type": lambda r: r["answers"]["grounded"].update(type="bool"),
    "choice-probability-2": lambda r: r["answers"]["verdict"]["probabilities"].update(unknown=2.0),
    "choice-confidence-string": lambda r: r["answers"]["verdict"].update(confidence="high"),
    "score-probability-negative": lambda r: r["answers"]["quality"]["probabilities"].update(
        {"0": -0.1}
    ),
    "usage-negative": lambda r: r["usage"].update(input_tokens=-1),
    "usage-output-negative": lambda r: r["usage"].update(output_tokens=-5),
    "usage-float": lambda r: r["usage"].update(input_tokens=521.5),
    "usage-integral-float": lambda r: r["usage"].update(input_tokens=521.0),
    "usage-string": lambda r: r["usage"].update(input_tokens="521"),
    "usage-missing": lambda r: r.pop("usage"),
    "usage-2^70": lambda r: r["usage"].update(input_tokens=2**70),
    "usage-2^63": lambda r: r["usage"].update(input_tokens=2**63),
    "usage-over-the-cap": lambda r: r["usage"].update(input_tokens=100_000_001),
    "usage-output-2^64": lambda r: r["usage"].update(output_tokens=2**64),
    "score-above-the-top-level": lambda r: r["answers"]["quality"].update(score=2.5),
    "score-negative": lambda r: r["answers"]["quality"].update(score=-0.1),
    "score-huge": lambda r: r["answers"]["quality"].update(score=1e308),
    "usage-input-missing": lambda r: r["usage"].pop("input_tokens"),
    "model-missing": lambda r: r.pop("model"),
    "answers-list": lambda r: r.update(answers=[]),
    "answer-not-object": lambda r: r["answers"].update(grounded=0.98),
}


@pytest.mark.parametrize("mutate", list(WIRE_BAD.values()), ids=list(WIRE_BAD))
def test_invalid_values_are_malformed(mutate: Callable[[dict[str, Any]], object]) -> None:
    malformed(body_of(mutate))


@pytest.mark.parametrize("literal", [b"NaN", b"Infinity", b"-Infinity", b"1e999"])
def test_non_finite_probability_is_malformed(literal: bytes) -> None:
    body = orjson.dumps(valid_reply()).replace(b'"noul":0.98', b'"noul":' + literal)
    assert literal in body
    error = malformed(body)
    assert "grounded" in str(error)


def test_non_finite_score_is_malformed() -> None:
    body = orjson.dumps(valid_reply()).replace(b'"score":1.7', b'"score":NaN')
    malformed(body)


@pytest.mark.parametrize(
    "body",
    [b"", b"{", b"not json", b"[]", b"null", b'{"model": "m"'],
    ids=["empty", "truncated", "text", "array", "null", "unclosed"],
)
def test_unparseable_body_is_malformed(body: bytes) -> None:
    malformed(body)


CHOICE_BAD: dict[str, Callable[[dict[str, Any]], object]] = {
    "missing-option": lambda r: r["answers"]["verdict"]["probabilities"].pop("unknown"),
    "extra-option": lambda r: r["answers"]["verdict"]["probabilities"].update(maybe=0.0),
    "renamed-option": lambda r: r["answers"]["verdict"].update(
        probabilities={"supported": 0.93, "contradicted": 0.02, "Unknown": 0.05}
    ),
    "choice-not-an-option": lambda r: r["answers"]["verdict"].update(choice="maybe"),
}


@pytest.mark.parametrize("mutate", list(CHOICE_BAD.values()), ids=list(CHOICE_BAD))
def test_choice_options_must_match_the_asked_criteria(
    mutate: Callable[[dict[str, Any]], object],
) -> None:
    error = malformed(body_of(mutate))
    assert "'verdict' options differ" in str(error)


@pytest.mark.parametrize(
    ("answer", "probabilities", "total"),
    [
        ("verdict", {"supported": 0.98, "contradicted": 0.12, "unknown": 0.1}, "1.2"),
        ("quality", {"0": 0.08, "1": 0.08, "2": 0.64}, "0.8"),
    ],
)
def test_a_distribution_that_does_not_sum_to_1_is_malformed(
    answer: str, probabilities: dict[str, float], total: str
) -> None:
    error = malformed(body_of(lambda r: r["answers"][answer].update(probabilities=probabilities)))
    assert f"{answer!r} probabilities sum to {total}, not 1" in str(error)


def test_many_rounded_options_may_sum_further_from_1() -> None:
    # 150 options of p = 0.0064 shown to 3 decimals (0.006) and one of 0.04: the shown sum is
    # 0.94, within the rounding of 151 values (151 x 0.0005); unrounded, 0.94 is too far from 1.
    options: dict[str, str | None] = {f"o{i}": None for i in range(151)}
    question = Question(type="choice", instructions="?", criteria=options)
    request = JevRequest(model="m", state={}, questions={"q": question})

    def reply(small: float) -> bytes:
        probabilities = {name: small for name in options} | {"o0": 0.04}
        answer = {"type": "choice", "choice": "o0", "confidence": 0.0}
        answer["probabilities"] = probabilities
        return orjson.dumps({"model": "m", "answers": {"q": answer}, "usage": {"input_tokens": 1}})

    parse_reply(request, reply(0.006))
    with pytest.raises(ProviderError, match=r"sum to 0\.94, not 1"):
        parse_reply(request, reply(0.0060001))


def test_a_rounded_distribution_is_accepted() -> None:
    reply = valid_reply()
    reply["answers"]["verdict"]["probabilities"] = {
        "supported": 0.34,
        "contradicted": 0.33,
        "unknown": 0.34,
    }
    parse_reply(REQUEST, orjson.dumps(reply))


@pytest.mark.parametrize(
    "levels",
    [
        {"0": 0.5, "1": 0.5},
        {"0": 0.1, "1": 0.1, "2": 0.7, "3": 0.1},
        {"1": 0.2, "2": 0.8, "3": 0.0},
    ],
    ids=["missing-level", "extra-level", "one-based"],
)
def test_score_levels_must_match_the_asked_criteria(levels: dict[str, float]) -> None:
    error = malformed(body_of(lambda r: r["answers"]["quality"].update(probabilities=levels)))
    assert "'quality' levels differ" in str(error)


@pytest.mark.parametrize(
    "legend",
    [{"0": "bad", "1": "ok", "5": "good"}, {"bad": "0", "ok": "1", "good": "2"}],
    ids=["out-of-range", "named"],
)
def test_score_legend_keys_must_be_the_asked_levels(legend: dict[str, str]) -> None:
    # jev-api.md: "score legend/probability keys '0'..'n-1'"
    malformed(body_of(lambda r: r["answers"]["quality"].update(legend=legend)))


def test_request_id_is_optional() -> None:
    with pytest.raises(ProviderError) as info:
        parse_reply(REQUEST, b"{}")
    assert info.value.request_id is None
    assert "request id" not in str(info.value)


# -- the bytes of a request -----------------------------------------------------------------------


def test_body_and_key_are_those_of_the_whole_model_dumped() -> None:
    # body() and request_key() reuse each question's dump: the bytes stay those of dumping the
    # whole request (null criteria left out of the body, kept in the key), so every existing
    # cache key still matches
    state = {"question": "q", "contexts": [{"id": "c1", "text": "t", "score": None}], "x": None}
    bare = Question(type="noul", instructions="Relevant?")  # criteria None
    assert REQUEST.state_json == orjson.dumps(REQUEST.state, option=orjson.OPT_SORT_KEYS)
    asked = REQUEST.model_copy(  # a copy dumps its own state, not the one it was copied from
        update={"state": state, "questions": {**REQUEST.questions, "b": bare}}
    )
    # the key is made of parts: keys that sort before or after the others' names, nested
    # dicts out of order, text JSON escapes
    odd = {"zz": {"b": 1, "a": [{"y": 'é\n"\u2028', "x": None}]}, "a": "\U0001f600", "": 1}
    oddly = REQUEST.model_copy(update={"state": odd, "model": 'm"odel/ü'})
    for request in (REQUEST, asked, oddly):
        whole = orjson.dumps(request.model_dump(mode="json", exclude_none=True))
        assert request.body() == whole
        payload = {
            "endpoint": "/v1/systemone",
            "model": request.model,
            "state": request.state,
            "questions": {k: q.model_dump(mode="json") for k, q in request.questions.items()},
        }
        digest = hashlib.sha256(orjson.dumps(payload, option=orjson.OPT_SORT_KEYS)).hexdigest()
        assert request_key("/v1/systemone", request) == digest
    assert b'"criteria":null' not in asked.body() and b'"x":null' in asked.body()
    assert bare.wire["criteria"] is None and bare.sent is bare.sent  # dumped once


def test_a_copied_question_dumps_its_own_fields() -> None:
    question = Question(type="noul", instructions="Supported?")
    assert question.wire["instructions"] == "Supported?" and question.estimated_tokens > 0
    changed = question.model_copy(update={"instructions": "Relevant to the whole question?"})
    assert changed.wire["instructions"] == changed.sent["instructions"] == changed.instructions
    assert changed.estimated_tokens > question.estimated_tokens
