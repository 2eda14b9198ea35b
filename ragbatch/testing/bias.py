"""A judge with injected biases, for the loopback Jev server (pure: no I/O).

It answers every ``noul`` question with a probability drawn from a seeded hash of the row's
question, its contexts as a set (sorted by id), the reference answer and the question's positive
wording, so that an unbiased judge gives the same answer whatever the order of the contexts and
whatever the length of the answer. Four biases can then be injected, each alone or together:

- ``order=D``: the relevance of the FIRST listed context is raised by ``D``;
- ``length=D``: groundedness is raised by ``D`` per doubling of the answer's length over 100
  characters (an answer twice as long is ``D`` more grounded);
- ``repeat=J``: each request is answered with a jitter uniform in ``[-J, J]`` per question, drawn
  from the seed, the request's content and how many times that same request was seen before, so
  the identical request sent again is answered slightly differently (deterministic under any
  concurrency);
- ``yes-lean=D``: a negated question gets ``1 - p + D`` instead of the complementary ``1 - p``.

A negated question is recognised by its question id, which the ``complement`` probe prefixes
with :data:`NEGATION_PREFIX` (``not:``); what a question judges is its id less that prefix,
or for a chunk question the context id its instructions name. Probabilities are clipped to ``[0, 1]`` and rounded to 3 decimals,
as the wire's ``noul`` is.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["BIASES", "NEGATION_PREFIX", "Bias", "BiasedJudge", "judgment_key", "parse_bias"]

BIASES = ("order", "length", "repeat", "yes-lean")
NEGATION_PREFIX = "not:"
_CHUNK_PREFIX = "chunkRelevance:"
_LENGTH_ORIGIN = 100  # characters: an answer this long gets no length bias
_CHUNK_ID = re.compile(r"context with id (.+?) (?:contain|lack)")


@dataclass(frozen=True, slots=True)
class Bias:
    """The size of each injected bias; all zero is an unbiased judge."""

    order: float = 0.0
    length: float = 0.0
    repeat: float = 0.0
    yes_lean: float = 0.0

    @property
    def is_none(self) -> bool:
        """True when no bias is injected."""
        return not (self.order or self.length or self.repeat or self.yes_lean)


def parse_bias(text: str) -> Bias:
    """``"order=0.2,length=0.1"`` -> :class:`Bias`; raises ``ValueError`` on a bad item."""
    sizes: dict[str, float] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, _, value = item.partition("=")
        if name not in BIASES or not value:
            raise ValueError(f"bias {item!r}: expected NAME=SIZE with NAME one of {BIASES}")
        sizes[name.replace("-", "_")] = float(value)
    return Bias(**sizes)


def _unit(*parts: Any) -> float:
    canonical = json.dumps(list(parts), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    digest = hashlib.sha256(canonical.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


def judgment_key(question_id: str, question: Mapping[str, Any]) -> tuple[str, bool]:
    """What a question judges, the same for its positive and negated wording, and whether it
    is negated: a chunk question's context id (read from its instructions, as its id is a
    position), else the question id less the ``not:`` prefix."""
    negated = question_id.startswith(NEGATION_PREFIX)
    base = question_id.removeprefix(NEGATION_PREFIX)
    if base.startswith(_CHUNK_PREFIX):
        match = _CHUNK_ID.search(str(question.get("instructions", "")))
        return f"{_CHUNK_PREFIX}{match.group(1) if match else base}", negated
    return base, negated


def _row_key(state: Mapping[str, Any]) -> list[Any]:
    contexts = sorted((str(c.get("id")), str(c.get("text"))) for c in state.get("contexts") or [])
    return [state.get("question"), contexts, state.get("referenceAnswer")]


def _first_context(state: Mapping[str, Any]) -> str | None:
    contexts = state.get("contexts") or []
    return f"{_CHUNK_PREFIX}{contexts[0].get('id')!r}" if contexts else None


@dataclass
class BiasedJudge:
    """Answers a request's ``noul`` questions with ``bias`` injected (thread-safe)."""

    bias: Bias = Bias()
    seed: int = 0
    _seen: dict[str, int] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def base(self, state: Mapping[str, Any], judged: str) -> float:
        """The unbiased P(true) of what ``judged`` names (see :func:`judgment_key`): in
        [0.1, 0.9], whatever the order of the contexts and the length of the answer."""
        return 0.1 + 0.8 * _unit(self.seed, _row_key(state), judged)

    def probability(
        self,
        state: Mapping[str, Any],
        question_id: str,
        question: Mapping[str, Any],
        occurrence: int = 0,
    ) -> float:
        """P(true) with every bias applied, clipped to [0, 1] and rounded to 3 decimals."""
        judged, negated = judgment_key(question_id, question)
        p = self.base(state, judged)
        if self.bias.order and judged == _first_context(state):
            p += self.bias.order
        if self.bias.length and judged == "groundedness":
            length = max(len(str(state.get("answer") or "")), 1)
            p += self.bias.length * math.log2(length / _LENGTH_ORIGIN)
        p = min(max(p, 0.0), 1.0)
        if negated:
            p = 1.0 - p + self.bias.yes_lean
        if self.bias.repeat:
            p += self.bias.repeat * (2 * _unit(self.seed, state, question, occurrence) - 1)
        return round(min(max(p, 0.0), 1.0), 3)

    def answers(
        self, state: Mapping[str, Any], questions: Mapping[str, Mapping[str, Any]]
    ) -> dict[str, float]:
        """P(true) per ``noul`` question id of one request (other types are left out)."""
        key = json.dumps([state, questions], sort_keys=True, ensure_ascii=False)
        with self._lock:
            occurrence = self._seen.get(key, 0)
            self._seen[key] = occurrence + 1
        return {
            qid: self.probability(state, qid, q, occurrence)
            for qid, q in questions.items()
            if q.get("type") == "noul"
        }
