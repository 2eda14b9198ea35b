"""The precedence table over per-judgment thresholds, for threshold search (pure: no I/O).

``ragbatch.core.policy.diagnose`` applies one (fail, pass) pair to every judgment; calibration
needs one pair per judgment and millions of evaluations, so this module restates the same
table (docs/semantics.md §2) over *statuses*: each judgment is LOW (``p <= fail``), BAND
(``fail < p < pass``), HIGH (``p >= pass``) or ABSENT (not asked). A row's diagnosis depends
only on its statuses, which is what lets the search evaluate a threshold move cheaply. A test
checks that with uniform thresholds :func:`rediagnose` agrees with ``diagnose`` on every row
of the golden report. Claim mode (claim verdicts replacing groundedness) is not covered.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ragbatch.core.errors import ConfigError
from ragbatch.core.schema import Diagnosis, Route

JUDGMENTS: tuple[str, ...] = (
    "chunkRelevance",  # the best chunk: max over the row's chunk relevances
    "contextSufficiency",
    "contextConflict",
    "answerRelevance",
    "groundedness",
    "contradiction",
    "correctness",  # reference rows only
)
CHUNK, SUFFICIENCY, CONFLICT, RELEVANCE, GROUNDED, CONTRADICTION, CORRECTNESS = range(7)
LOW, BAND, HIGH, ABSENT = range(4)

Signals = tuple[float | None, ...]
"""One row's P(true) per judgment, in ``JUDGMENTS`` order; None = not asked."""
Pair = tuple[float, float]
MIN_TIE_BLOCK = 10

_REQUIRED = (
    ("retrieval", "sufficiency", SUFFICIENCY),
    ("retrieval", "conflict", CONFLICT),
    ("generation", "relevance", RELEVANCE),
    ("generation", "groundedness", GROUNDED),
    ("generation", "contradiction", CONTRADICTION),
)
# The value of each judgment that means "nothing wrong" (conflict and contradiction are bad
# when true); an expected diagnosis implies these for every rule that precedes it.
GOOD: dict[str, bool] = {
    "chunkRelevance": True,
    "contextSufficiency": True,
    "contextConflict": False,
    "answerRelevance": True,
    "groundedness": True,
    "contradiction": False,
    "correctness": True,
}
_RULES: tuple[tuple[Diagnosis, tuple[str, ...]], ...] = (
    ("CONFLICTING_EVIDENCE", ("contextConflict",)),
    ("RETRIEVAL_MISS", ("chunkRelevance",)),
    ("RETRIEVAL_INSUFFICIENT", ("contextSufficiency",)),
    ("ANSWER_IRRELEVANT", ("answerRelevance",)),
    ("GENERATOR_UNGROUNDED", ("groundedness", "contradiction")),
    ("ANSWER_INCORRECT", ("correctness",)),
)


def signals_of(judgments: Mapping[str, Any]) -> Signals:
    """The signals of a report row (or any mapping with ``retrieval``/``generation`` blocks).

    Raises :class:`ConfigError` when a judgment every row is asked is missing.
    """
    retrieval: Mapping[str, Any] = judgments.get("retrieval") or {}
    generation: Mapping[str, Any] = judgments.get("generation") or {}
    values: list[float | None] = [None] * len(JUDGMENTS)
    chunks: Mapping[str, float] = retrieval.get("chunkRelevance") or {}
    values[CHUNK] = max(chunks.values()) if chunks else None
    for block, key, index in _REQUIRED:
        value = (retrieval if block == "retrieval" else generation).get(key)
        if value is None:
            where = judgments.get("id", "?")
            raise ConfigError(
                f"row {where}: judgment {block}.{key} is missing; calibration needs every "
                "judgment of successful rows (was the report produced by ragbatch run?)"
            )
        values[index] = float(value)
    correctness = generation.get("correctness")
    values[CORRECTNESS] = None if correctness is None else float(correctness)
    return tuple(values)


def status(p: float | None, pair: Pair) -> int:
    """LOW, BAND, HIGH (both thresholds inclusive on their side) or ABSENT."""
    if p is None:
        return ABSENT
    if p <= pair[0]:
        return LOW
    return HIGH if p >= pair[1] else BAND


def decide(st: Sequence[int]) -> Diagnosis:
    """The precedence table over statuses (``JUDGMENTS`` order); first matching rule wins."""
    if st[CONFLICT] == HIGH:
        return "CONFLICTING_EVIDENCE"
    if st[CHUNK] == ABSENT or st[CHUNK] == LOW:  # no contexts, or the best chunk is low
        return "RETRIEVAL_MISS"
    if st[SUFFICIENCY] == LOW:
        return "RETRIEVAL_INSUFFICIENT"
    if st[RELEVANCE] == LOW:
        return "ANSWER_IRRELEVANT"
    if st[GROUNDED] == LOW or st[CONTRADICTION] == HIGH:
        return "GENERATOR_UNGROUNDED"
    if st[CORRECTNESS] == LOW:
        return "ANSWER_INCORRECT"
    if BAND in st:
        return "JUDGE_UNCERTAIN"
    return "PASS"


def decide_guarded(st: Sequence[int]) -> Diagnosis:
    """The guarded walk over statuses (docs/semantics.md §2a): a rule fires, is ruled out, or
    stops the walk undecided (JUDGE_UNCERTAIN)."""
    if st[CONFLICT] == HIGH:
        return "CONFLICTING_EVIDENCE"
    if st[CONFLICT] != LOW:
        return "JUDGE_UNCERTAIN"
    if st[CHUNK] == ABSENT or st[CHUNK] == LOW:
        return "RETRIEVAL_MISS"
    if st[CHUNK] != HIGH:
        return "JUDGE_UNCERTAIN"
    if st[SUFFICIENCY] == LOW:
        return "RETRIEVAL_INSUFFICIENT"
    if st[SUFFICIENCY] != HIGH:
        return "JUDGE_UNCERTAIN"
    if st[RELEVANCE] == LOW:
        return "ANSWER_IRRELEVANT"
    if st[RELEVANCE] != HIGH:
        return "JUDGE_UNCERTAIN"
    if st[GROUNDED] == LOW or st[CONTRADICTION] == HIGH:
        return "GENERATOR_UNGROUNDED"
    if st[GROUNDED] != HIGH or st[CONTRADICTION] != LOW:
        return "JUDGE_UNCERTAIN"
    if st[CORRECTNESS] == LOW:
        return "ANSWER_INCORRECT"
    if st[CORRECTNESS] == BAND:
        return "JUDGE_UNCERTAIN"
    return "PASS"


Decide = Callable[[Sequence[int]], Diagnosis]
DECIDE: dict[str, Decide] = {"showcase": decide, "guarded": decide_guarded}
"""The precedence walk of each routing, over statuses."""


def check_pairs(thresholds: Mapping[str, Pair], names: Sequence[str] = JUDGMENTS) -> None:
    """Raise :class:`ConfigError` unless every name has a pair with 0 <= fail < pass <= 1."""
    for name in names:
        pair = thresholds.get(name)
        if pair is None:
            raise ConfigError(f"no thresholds for judgment {name}; give one pair per judgment")
        if not (0.0 <= pair[0] < pair[1] <= 1.0):
            raise ConfigError(
                f"thresholds of {name} must satisfy 0 <= fail < pass <= 1, got {pair}"
            )


def uniform(fail: float, pass_: float) -> dict[str, Pair]:
    """The same (fail, pass) pair for every judgment."""
    pairs = dict.fromkeys(JUDGMENTS, (fail, pass_))
    check_pairs(pairs)
    return pairs


def statuses(sig: Signals, thresholds: Mapping[str, Pair]) -> list[int]:
    """The status of every judgment of one row."""
    return statuses_in_order(sig, in_order(thresholds))


def in_order(thresholds: Mapping[str, Pair]) -> list[Pair]:
    """The pairs in ``JUDGMENTS`` order, for :func:`statuses_in_order`."""
    return [thresholds[name] for name in JUDGMENTS]


def statuses_in_order(sig: Signals, pairs: Sequence[Pair]) -> list[int]:
    """:func:`statuses` with the pairs already in order (the search's hot loop)."""
    return [
        ABSENT if p is None else LOW if p <= f else HIGH if p >= q else BAND
        for p, (f, q) in zip(sig, pairs, strict=True)
    ]


def rediagnose(
    judgments: Mapping[str, Any], thresholds: Mapping[str, Pair], routing: str = "showcase"
) -> tuple[Diagnosis, Route]:
    """Diagnosis and route of one row under per-judgment (fail, pass) thresholds.

    ``judgments`` is a report row dict (or any mapping with camelCase ``retrieval`` and
    ``generation`` blocks); ``thresholds`` maps every name of ``JUDGMENTS`` to a pair.
    """
    check_pairs(thresholds)
    diagnosis = DECIDE[routing](statuses(signals_of(judgments), thresholds))
    return diagnosis, "fallback" if diagnosis == "JUDGE_UNCERTAIN" else "auto"


def implied_labels(expected: str | None) -> dict[str, bool]:
    """Per-judgment truths an expected diagnosis implies through the precedence table.

    Every rule before the expected one was false (its judgments on the good side) and the
    expected rule's judgment was bad; GENERATOR_UNGROUNDED does not say which of its two
    judgments failed, and JUDGE_UNCERTAIN implies nothing.
    """
    labels: dict[str, bool] = {}
    if expected is None or expected == "JUDGE_UNCERTAIN":
        return labels
    for diagnosis, names in _RULES:
        if diagnosis == expected:
            if len(names) == 1:
                labels[names[0]] = not GOOD[names[0]]
            return labels
        labels.update((name, GOOD[name]) for name in names)
    return labels  # PASS: every judgment on its good side


def fixed_diagnosis(sig: Signals) -> tuple[Diagnosis, str] | None:
    """The diagnosis a row gets under *every* valid thresholds, with why; else None.

    With ``0 <= fail < pass <= 1``, p = 0 is always low and p = 1 always high, so a row whose
    deciding answers sit exactly on 0 or 1 cannot be sent to the uncertain band by any
    threshold: it is always decided automatically, right or wrong.
    """

    def low(i: int) -> int:  # 1 always, 0 never, -1 depends on the thresholds
        p = sig[i]
        return 0 if p is None else 1 if p == 0.0 else 0 if p == 1.0 else -1

    def high(i: int) -> int:
        p = sig[i]
        return 0 if p is None else 1 if p == 1.0 else 0 if p == 0.0 else -1

    def grounded_rule() -> int:
        a, b = low(GROUNDED), high(CONTRADICTION)
        return 1 if 1 in (a, b) else 0 if a == b == 0 else -1

    chunk = 1 if sig[CHUNK] is None else low(CHUNK)
    rules: list[tuple[int, Diagnosis, str]] = [
        (
            high(CONFLICT),
            "CONFLICTING_EVIDENCE",
            f"share p = {sig[CONFLICT]} exactly on contextConflict",
        ),
        (chunk, "RETRIEVAL_MISS", _why(sig, CHUNK, "have no retrieved contexts")),
        (low(SUFFICIENCY), "RETRIEVAL_INSUFFICIENT", _why(sig, SUFFICIENCY, "")),
        (low(RELEVANCE), "ANSWER_IRRELEVANT", _why(sig, RELEVANCE, "")),
        (grounded_rule(), "GENERATOR_UNGROUNDED", _grounded_why(sig)),
        (low(CORRECTNESS), "ANSWER_INCORRECT", _why(sig, CORRECTNESS, "")),
    ]
    for state, diagnosis, why in rules:
        if state == 1:
            return diagnosis, why
        if state == -1:
            return None
    if any(p is not None and 0.0 < p < 1.0 for p in sig):
        return None
    return "PASS", "answer exactly 0 or 1 on every judgment"


def tie_block(rows: Sequence[tuple[Signals, str]], target: float) -> str:
    """A sentence naming the largest block of rows no threshold can separate, if it hurts.

    Answers of exactly 0 or 1 are always low or always high; rows decided by them are
    automatic under any thresholds. A block of at least ``MIN_TIE_BLOCK`` such rows whose
    error rate exceeds the target is reported.
    """
    blocks: Counter[str] = Counter()
    wrong: Counter[str] = Counter()
    for sig, expected in rows:
        fixed = fixed_diagnosis(sig)
        if fixed is not None:
            blocks[fixed[1]] += 1
            wrong[fixed[1]] += fixed[0] != expected
    for why, n in blocks.most_common():
        if n >= MIN_TIE_BLOCK and wrong[why] / n > target:
            return (
                f"; {n} rows {why}, so no threshold can separate them: they are always "
                f"decided automatically and {wrong[why]} of them ({wrong[why] / n:.0%}) "
                "disagree with their labels"
            )
    return ""


def _why(sig: Signals, index: int, absent: str) -> str:
    p = sig[index]
    return absent if p is None else f"share p = {p} exactly on {JUDGMENTS[index]}"


def _grounded_why(sig: Signals) -> str:
    if sig[GROUNDED] == 0.0:
        return _why(sig, GROUNDED, "")
    return _why(sig, CONTRADICTION, "")
