"""Judge-independent answer checks from the golden set, and abstention metrics (pure: no I/O).

Phrase checks compare *normalised* text (:func:`normalize`: NFKC, casefold, whitespace
collapsed, punctuation stripped at word edges) and match whole words: "approval" is found in
"Written approval." but not in "disapproval". A phrase that normalises to nothing is ignored.

Abstention is scored from (P(the answer declines), expectedAbstention) pairs; the answer counts
as an abstention when P >= the threshold. With "should abstain" from the golden label:

- accuracy = rows where abstained == should abstain / rows.
- False Abstention Rate = rows that abstained among rows that should NOT abstain (the context
  supported an answer) / those rows.
- False Answer Rate = rows that answered among rows that SHOULD abstain / those rows; the
  dangerous failure (a confident answer with no support).
- refusal rate = rows that abstained / rows.

Every rate is ``safe``: 0 when its denominator is 0 (the matching count says so).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

from ragbatch.metrics import Out, brier, safe
from ragbatch.schema import Golden

DEFAULT_ABSTENTION_THRESHOLD = 0.5


def _is_punctuation(char: str) -> bool:
    return unicodedata.category(char).startswith("P")


def _strip_edges(token: str) -> str:
    start, end = 0, len(token)
    while start < end and _is_punctuation(token[start]):
        start += 1
    while end > start and _is_punctuation(token[end - 1]):
        end -= 1
    return token[start:end]


def normalize(text: str) -> str:
    """NFKC, casefold, collapse whitespace, strip punctuation at the edges of each word."""
    folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())
    words = (_strip_edges(token) for token in folded.split())
    return " ".join(word for word in words if word)


def contains_phrase(normalized_text: str, phrase: str) -> bool:
    """Whether ``phrase`` (raw) occurs as whole words in already-normalised text."""
    wanted = normalize(phrase)
    return bool(wanted) and f" {wanted} " in f" {normalized_text} "


class AnswerCheck(Out):
    """One row's phrase checks; a pass is None when the golden block sets no such phrases."""

    contains_pass: bool | None
    must_not_contain_pass: bool | None
    missing: list[str]
    forbidden: list[str]


def _phrases(raw: Sequence[str]) -> list[str]:
    return [phrase for phrase in raw if normalize(phrase)]


def check_answer(answer: str, golden: Golden | None) -> AnswerCheck:
    """Check ``expectedAnswerContains`` (all must occur) and ``mustNotContain`` (none may)."""
    wanted = _phrases(golden.expected_answer_contains) if golden else []
    banned = _phrases(golden.must_not_contain) if golden else []
    text = normalize(answer)
    missing = [phrase for phrase in wanted if not contains_phrase(text, phrase)]
    forbidden = [phrase for phrase in banned if contains_phrase(text, phrase)]
    return AnswerCheck(
        contains_pass=not missing if wanted else None,
        must_not_contain_pass=not forbidden if banned else None,
        missing=missing,
        forbidden=forbidden,
    )


class AnswerChecks(Out):
    """Pass rates over the rows that carry each kind of check (``rows``: any check)."""

    rows: int
    contains_rows: int
    contains_passed: int
    contains_pass_rate: float
    must_not_contain_rows: int
    must_not_contain_passed: int
    must_not_contain_pass_rate: float


def aggregate_checks(checks: Sequence[AnswerCheck]) -> AnswerChecks:
    """Pass rates; rows without a kind of check are left out of that kind's rate."""
    contains = [c.contains_pass for c in checks if c.contains_pass is not None]
    banned = [c.must_not_contain_pass for c in checks if c.must_not_contain_pass is not None]
    rows = sum(c.contains_pass is not None or c.must_not_contain_pass is not None for c in checks)
    return AnswerChecks(
        rows=rows,
        contains_rows=len(contains),
        contains_passed=sum(contains),
        contains_pass_rate=safe(sum(contains), len(contains)),
        must_not_contain_rows=len(banned),
        must_not_contain_passed=sum(banned),
        must_not_contain_pass_rate=safe(sum(banned), len(banned)),
    )


class Abstention(Out):
    """Abstention quality over rows with ``expectedAbstention`` and a P(declines) judgment."""

    count: int
    threshold: float
    should_abstain: int
    should_answer: int
    abstained: int
    correct: int
    false_abstentions: int
    false_answers: int
    accuracy: float
    false_abstention_rate: float
    false_answer_rate: float
    refusal_rate: float
    brier: float


def abstention_metrics(
    pairs: Sequence[tuple[float, bool]], threshold: float = DEFAULT_ABSTENTION_THRESHOLD
) -> Abstention:
    """``pairs`` = (P(the answer declines), expected abstention), one per labelled row."""
    decided = [(p >= threshold, expected) for p, expected in pairs]
    n = len(pairs)
    should_abstain = sum(expected for _, expected in decided)
    should_answer = n - should_abstain
    false_abstentions = sum(abstained and not expected for abstained, expected in decided)
    false_answers = sum(expected and not abstained for abstained, expected in decided)
    abstained = sum(a for a, _ in decided)
    correct = sum(a == expected for a, expected in decided)
    return Abstention(
        count=n,
        threshold=threshold,
        should_abstain=should_abstain,
        should_answer=should_answer,
        abstained=abstained,
        correct=correct,
        false_abstentions=false_abstentions,
        false_answers=false_answers,
        accuracy=safe(correct, n),
        false_abstention_rate=safe(false_abstentions, should_answer),
        false_answer_rate=safe(false_answers, should_abstain),
        refusal_rate=safe(abstained, n),
        brier=brier(pairs),
    )
