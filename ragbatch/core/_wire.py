"""The Jev wire protocol: request bodies, reply validation, canonical bytes (pure: no I/O).

A reply reaches policy code only after :func:`parse_reply` has checked it against the request
that was sent: exactly the asked answer ids, each of the asked type, finite probabilities in
[0, 1] summing to 1 (within 0.05, or the rounding of many values), choice keys equal to the
option names, scores within their levels, usage integers in [0, ``MAX_CALL_TOKENS``]. Anything
else raises :class:`~ragbatch.core._errors.ProviderError` of kind ``malformed-response``.
"""

from __future__ import annotations

import functools
import hashlib
import math
from collections.abc import Mapping
from typing import Annotated, Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ragbatch.core._errors import ProviderError
from ragbatch.core._schema import Probability

Criteria = dict[str, str | None] | list[str] | None
# How far a choice or score distribution may sum from 1 (jevcompat's spec §5): 0.05, or more
# when many values are each rounded (half a unit of the last decimal shown, per value).
# Further off, the probabilities read from it mean something else: a failed call.
PROBABILITY_SUM_TOLERANCE = 0.05
# The most tokens one call may report: 1,500 times the largest request the service accepts
# (64k). More is no usage but a broken or hostile reply; unbounded, a count such as 2^63
# would be cached and then overflow every sum (reports, replays) built from it.
MAX_CALL_TOKENS = 100_000_000
# A score is an expected level: within [0, levels - 1], give or take the rounding shown.
SCORE_TOLERANCE = 1e-6


def _sum_tolerance(values: list[float]) -> float:
    decimals = next(
        (d for d in range(2, 7) if all(abs(v - round(v, d)) < 1e-9 for v in values)), None
    )
    rounding = 0.0 if decimals is None else 0.5 / 10**decimals
    return max(PROBABILITY_SUM_TOLERANCE, len(values) * rounding)


class Question(BaseModel):
    """One typed question; ``criteria`` is the option map (noul/choice) or level list (score)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    type: Literal["noul", "choice", "score"]
    instructions: str
    criteria: Criteria = None

    # Computed once per instance: the questions are shared by every row that asks them, so
    # each row's request key and body reuse these instead of dumping eight models again.
    @functools.cached_property
    def wire(self) -> dict[str, Any]:
        """Every field as JSON values (what the request key hashes). Never mutate it."""
        return self.model_dump(mode="json")

    @functools.cached_property
    def sent(self) -> dict[str, Any]:
        """The question as sent: no null fields. Never mutate it."""
        return self.model_dump(mode="json", exclude_none=True)

    @functools.cached_property
    def estimated_tokens(self) -> int:
        """~4 bytes a token of the question's canonical JSON."""
        return math.ceil(len(canonical_json(self.wire)) / 4)

    def model_copy(
        self, *, update: Mapping[str, Any] | None = None, deep: bool = False
    ) -> Question:
        """A copy (pydantic's) that computes its cached dumps afresh: pydantic copies the
        instance's ``__dict__``, where a cached property keeps its value."""
        copy = super().model_copy(update=update, deep=deep)
        for name in ("wire", "sent", "estimated_tokens"):
            copy.__dict__.pop(name, None)
        return copy


class JevRequest(BaseModel):
    """What is POSTed to ``/v1/systemone``: the requested model, the state and the questions."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str
    state: dict[str, Any]
    questions: dict[str, Question]

    def body(self) -> bytes:
        """The JSON body as sent over HTTP (``model_dump(mode="json", exclude_none=True)``:
        null fields of the questions left out, the state as it is)."""
        questions = {qid: question.sent for qid, question in self.questions.items()}
        return orjson.dumps({"model": self.model, "state": self.state, "questions": questions})

    @functools.cached_property
    def state_json(self) -> bytes:
        """The state's canonical JSON, made once a request: a live row's size checks, its
        token estimate and its cache key all read it (each dumped the state before). Never
        mutate ``state``."""
        return canonical_json(self.state)

    def model_copy(
        self, *, update: Mapping[str, Any] | None = None, deep: bool = False
    ) -> JevRequest:
        """A copy (pydantic's) that dumps its own state afresh (see :meth:`Question.model_copy`)."""
        copy = super().model_copy(update=update, deep=deep)
        copy.__dict__.pop("state_json", None)
        return copy


def canonical_json(value: Any) -> bytes:
    """Sorted-key compact JSON: the same value always gives the same bytes."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def request_key(endpoint: str, request: JevRequest, probe: str | None = None) -> str:
    """Content address of a request: sha256 of what determines the answer, nothing else.

    ``probe`` (the judge audit's ``repeat``, docs/semantics.md §9) is hashed but never sent:
    the same request asked again gets a key of its own, so it goes past the cached reply."""
    questions = {qid: question.wire for qid, question in request.questions.items()}
    # canonical_json({"endpoint", "model", ("probe",) "state", "questions"}), made of its
    # parts in sorted-key order: the state's is the request's own dump (state_json)
    marker = b"" if probe is None else b'"probe":%b,' % orjson.dumps(probe)
    payload = b'{"endpoint":%b,"model":%b,%b"questions":%b,"state":%b}' % (
        orjson.dumps(endpoint),
        orjson.dumps(request.model),
        marker,
        canonical_json(questions),
        request.state_json,
    )
    return hashlib.sha256(payload).hexdigest()


class _Wire(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore", strict=True)


class NoulAnswer(_Wire):
    type: Literal["noul"]
    noul: Probability


class ChoiceAnswer(_Wire):
    type: Literal["choice"]
    choice: str
    confidence: Probability
    probabilities: dict[str, Probability]


class ScoreAnswer(_Wire):
    type: Literal["score"]
    score: Annotated[float, Field(allow_inf_nan=False)]
    confidence: Probability
    legend: dict[str, str] = Field(default_factory=dict)
    probabilities: dict[str, Probability]


Answer = Annotated[NoulAnswer | ChoiceAnswer | ScoreAnswer, Field(discriminator="type")]


class WireUsage(_Wire):
    input_tokens: Annotated[int, Field(ge=0, le=MAX_CALL_TOKENS)]
    output_tokens: Annotated[int, Field(ge=0, le=MAX_CALL_TOKENS)] = 0


class WireReply(_Wire):
    model: str
    answers: dict[str, Answer]
    usage: WireUsage


def _malformed(message: str, request_id: str | None) -> ProviderError:
    return ProviderError(
        f"malformed response: {message}", kind="malformed-response", request_id=request_id
    )


def check_ranges(reply: WireReply, request_id: str | None = None) -> None:
    """The checks that need no request: every score within its levels (usage counts are
    bounded by :class:`WireUsage`). ``cache verify`` applies them to stored replies."""
    for qid, answer in reply.answers.items():
        if answer.type != "score":  # the tag, not isinstance: ABCMeta's check is slow
            continue
        top = len(answer.probabilities) - 1
        if not -SCORE_TOLERANCE <= answer.score <= top + SCORE_TOLERANCE:
            raise _malformed(
                f"answer {qid!r} score {answer.score:.6g} is not in [0, {top}]", request_id
            )


def _validated(body: bytes, request_id: str | None) -> WireReply:
    try:
        return WireReply.model_validate_json(body)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "body"
        raise _malformed(f"{where}: {first['msg']}", request_id) from None


def read_reply(body: bytes, request_id: str | None = None) -> WireReply:
    """A body parsed as a reply with every number in range (not matched to a request);
    raise ``malformed-response``."""
    reply = _validated(body, request_id)
    check_ranges(reply, request_id)
    return reply


def parse_reply(request: JevRequest, body: bytes, request_id: str | None = None) -> WireReply:
    """Validate a 200 body against the request it answers; raise ``malformed-response``."""
    reply = _validated(body, request_id)
    asked, got = set(request.questions), set(reply.answers)
    if asked != got:
        missing, extra = sorted(asked - got), sorted(got - asked)
        raise _malformed(f"answer ids differ (missing {missing}, unexpected {extra})", request_id)
    answers = reply.answers
    for qid, question in request.questions.items():
        answer = answers[qid]
        if answer.type != question.type:
            raise _malformed(f"answer {qid!r} is {answer.type}, asked {question.type}", request_id)
        if answer.type == "noul":  # one probability, which the model has checked: nearly all
            continue
        if isinstance(answer, ChoiceAnswer) and isinstance(question.criteria, dict):
            options = set(question.criteria)
            if set(answer.probabilities) != options or answer.choice not in options:
                raise _malformed(f"answer {qid!r} options differ from the asked ones", request_id)
        if isinstance(answer, ScoreAnswer) and isinstance(question.criteria, list):
            levels = {str(i) for i in range(len(question.criteria))}
            legend_ok = not answer.legend or set(answer.legend) == levels
            if set(answer.probabilities) != levels or not legend_ok:
                raise _malformed(f"answer {qid!r} levels differ from the asked ones", request_id)
        if isinstance(answer, ChoiceAnswer | ScoreAnswer):
            values = list(answer.probabilities.values())
            total = math.fsum(values)
            if abs(total - 1) > _sum_tolerance(values):
                raise _malformed(
                    f"answer {qid!r} probabilities sum to {total:.3g}, not 1", request_id
                )
    check_ranges(reply, request_id)
    return reply
