"""The ``lexical`` baseline judge: deterministic token overlap, no model, no network (pure).

A cheap floor to compare Jev against: if Jev does not beat word overlap, something is wrong.
Text is lower-cased (``casefold``) and split into word tokens (``\\w+``); a fixed list of
English function words is dropped, so "the" or "of" never count as evidence. Each check is
a *coverage*: the share of one text's distinct tokens found in another (0.0 when the first
text has no tokens: nothing to compare is no evidence).

==============  ===================================================  =========  ==================
check           coverage                                             threshold  failing diagnosis
==============  ===================================================  =========  ==================
retrieval       question tokens found in a context (best context)    0.25       RETRIEVAL_MISS
grounding       answer tokens found in all contexts together         0.50       GENERATOR_UNGROUNDED
correctness     reference tokens found in the answer (if reference)  0.50       ANSWER_INCORRECT
==============  ===================================================  =========  ==================

A row without contexts is a RETRIEVAL_MISS with confidence 1. Otherwise the first failing
check, in the order above (retrieval before generation, as in the Jev policy), gives the
diagnosis; a coverage equal to its threshold passes. Confidence grows with the margin to the
threshold: ``0.5 + 0.5 * (t - s) / t`` for the failing check, and for PASS ``0.5 + 0.5 *``
the smallest ``(s - t) / (1 - t)`` over the checks made. The thresholds are fixed so that
results are comparable across runs; they are not calibrated on any particular data set.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ragbatch.core import BaselineReply, Diagnosis, Row, TokenUsage

LEXICAL_MODEL = "lexical-baseline"
RETRIEVAL_THRESHOLD = 0.25
GROUNDING_THRESHOLD = 0.5
CORRECTNESS_THRESHOLD = 0.5

_TOKEN = re.compile(r"\w+")
STOP_WORDS = frozenset(
    [
        "a",
        "about",
        "above",
        "after",
        "again",
        "all",
        "also",
        "am",
        "an",
        "and",
        "any",
        "are",
        "as",
        "at",
        "be",
        "because",
        "been",
        "before",
        "being",
        "below",
        "between",
        "both",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "doing",
        "down",
        "during",
        "each",
        "few",
        "for",
        "from",
        "further",
        "had",
        "has",
        "have",
        "having",
        "he",
        "her",
        "here",
        "hers",
        "him",
        "his",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "itself",
        "just",
        "me",
        "more",
        "most",
        "my",
        "no",
        "nor",
        "not",
        "of",
        "off",
        "on",
        "once",
        "only",
        "or",
        "other",
        "our",
        "ours",
        "out",
        "over",
        "own",
        "same",
        "she",
        "should",
        "so",
        "some",
        "such",
        "than",
        "that",
        "the",
        "their",
        "theirs",
        "them",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "through",
        "to",
        "too",
        "under",
        "until",
        "up",
        "very",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
        "yours",
    ]
)


def tokens(text: str) -> frozenset[str]:
    """The distinct content tokens of ``text`` (case-folded words minus stop words)."""
    return frozenset(t for t in _TOKEN.findall(text.casefold()) if t not in STOP_WORDS)


def coverage(part: frozenset[str], whole: frozenset[str]) -> float:
    """Share of ``part`` found in ``whole``; 0.0 when ``part`` is empty."""
    return len(part & whole) / len(part) if part else 0.0


@dataclass(frozen=True, slots=True)
class LexicalScores:
    """The three coverages of one row (``correctness`` is None without a reference)."""

    retrieval: float
    grounding: float
    correctness: float | None


def score_row(row: Row) -> LexicalScores | None:
    """The row's coverages, or None when it has no contexts (nothing was retrieved)."""
    if not row.contexts:
        return None
    context_tokens = [tokens(c.text) for c in row.contexts]
    question, answer = tokens(row.question), tokens(row.answer)
    everything: frozenset[str] = frozenset().union(*context_tokens)
    reference = row.reference_answer
    return LexicalScores(
        retrieval=max(coverage(question, c) for c in context_tokens),
        grounding=coverage(answer, everything),
        correctness=None if reference is None else coverage(tokens(reference), answer),
    )


def diagnose(scores: LexicalScores | None) -> tuple[Diagnosis, float]:
    """Diagnosis and confidence from the coverages (see the module docstring)."""
    if scores is None:
        return "RETRIEVAL_MISS", 1.0
    checks: list[tuple[float, float, Diagnosis]] = [
        (scores.retrieval, RETRIEVAL_THRESHOLD, "RETRIEVAL_MISS"),
        (scores.grounding, GROUNDING_THRESHOLD, "GENERATOR_UNGROUNDED"),
    ]
    if scores.correctness is not None:
        checks.append((scores.correctness, CORRECTNESS_THRESHOLD, "ANSWER_INCORRECT"))
    for score, threshold, diagnosis in checks:
        if score < threshold:
            return diagnosis, 0.5 + 0.5 * (threshold - score) / threshold
    margin = min((score - threshold) / (1.0 - threshold) for score, threshold, _ in checks)
    return "PASS", 0.5 + 0.5 * margin


class LexicalBaseline:
    """``BaselineJudge`` by token overlap: free, instant, deterministic."""

    name = "lexical"

    async def judge(self, row: Row) -> BaselineReply:
        """The lexical verdict of ``row`` (never raises for a valid row)."""
        diagnosis, confidence = diagnose(score_row(row))
        return BaselineReply(
            diagnosis=diagnosis,
            confidence=confidence,
            model=LEXICAL_MODEL,
            latency_ms=0.0,
            usage=TokenUsage(input_tokens=0, output_tokens=0),
            estimated=False,
        )

    async def aclose(self) -> None:
        """Nothing to release."""
        return None
