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
from collections.abc import Iterable, Sequence

from ragbatch.core import Golden
from ragbatch.metrics._scores import ExactSum, Out, safe

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


class ChecksAccumulator:
    """Pass counts of answer checks, fed one :class:`AnswerCheck` at a time.

    ``checks`` counts every check added; ``rows`` only those carrying a phrase of either kind.
    """

    __slots__ = ("banned", "banned_passed", "checks", "contains", "contains_passed", "rows")

    def __init__(self) -> None:
        self.checks = self.rows = 0
        self.contains = self.contains_passed = self.banned = self.banned_passed = 0

    def add(self, check: AnswerCheck) -> None:
        self.checks += 1
        self.rows += check.contains_pass is not None or check.must_not_contain_pass is not None
        if check.contains_pass is not None:
            self.contains += 1
            self.contains_passed += check.contains_pass
        if check.must_not_contain_pass is not None:
            self.banned += 1
            self.banned_passed += check.must_not_contain_pass

    def result(self) -> AnswerChecks:
        return AnswerChecks(
            rows=self.rows,
            contains_rows=self.contains,
            contains_passed=self.contains_passed,
            contains_pass_rate=safe(self.contains_passed, self.contains),
            must_not_contain_rows=self.banned,
            must_not_contain_passed=self.banned_passed,
            must_not_contain_pass_rate=safe(self.banned_passed, self.banned),
        )


def aggregate_checks(checks: Iterable[AnswerCheck]) -> AnswerChecks:
    """Pass rates; rows without a kind of check are left out of that kind's rate."""
    total = ChecksAccumulator()
    for check in checks:
        total.add(check)
    return total.result()


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


class AbstentionAccumulator:
    """Abstention counts and the exact Brier sum, fed one (P(declines), expected) pair at a time."""

    __slots__ = (
        "abstained",
        "correct",
        "count",
        "false_abstentions",
        "false_answers",
        "should_abstain",
        "squares",
        "threshold",
    )

    def __init__(self, threshold: float = DEFAULT_ABSTENTION_THRESHOLD) -> None:
        self.threshold = threshold
        self.count = self.should_abstain = self.abstained = self.correct = 0
        self.false_abstentions = self.false_answers = 0
        self.squares = ExactSum()

    def add(self, p: float, expected: bool) -> None:
        abstained = p >= self.threshold
        self.count += 1
        self.should_abstain += expected
        self.abstained += abstained
        self.correct += abstained == expected
        self.false_abstentions += abstained and not expected
        self.false_answers += expected and not abstained
        self.squares.add((p - float(expected)) ** 2)

    def result(self) -> Abstention:
        n = self.count
        should_answer = n - self.should_abstain
        return Abstention(
            count=n,
            threshold=self.threshold,
            should_abstain=self.should_abstain,
            should_answer=should_answer,
            abstained=self.abstained,
            correct=self.correct,
            false_abstentions=self.false_abstentions,
            false_answers=self.false_answers,
            accuracy=safe(self.correct, n),
            false_abstention_rate=safe(self.false_abstentions, should_answer),
            false_answer_rate=safe(self.false_answers, self.should_abstain),
            refusal_rate=safe(self.abstained, n),
            brier=safe(self.squares.value(), n),  # = metrics.brier over the pairs
        )


def abstention_metrics(
    pairs: Iterable[tuple[float, bool]], threshold: float = DEFAULT_ABSTENTION_THRESHOLD
) -> Abstention:
    """``pairs`` = (P(the answer declines), expected abstention), one per labelled row."""
    total = AbstentionAccumulator(threshold)
    for p, expected in pairs:
        total.add(p, expected)
    return total.result()
