"""The precedence table over per-judgment thresholds, for threshold search (pure: no I/O).

``ragbatch.core._policy.diagnose`` applies one (fail, pass) pair to every judgment; calibration
needs one pair per judgment and millions of evaluations, so this module restates the same
table (docs/semantics.md §2) over *statuses*: each judgment is LOW (``p <= fail``), BAND
(``fail < p < pass``), HIGH (``p >= pass``) or ABSENT (not asked). A row's diagnosis depends
only on its statuses, which is what lets the search evaluate a threshold move cheaply. A test
checks that with uniform thresholds :func:`rediagnose` agrees with ``diagnose`` on every row
of the golden report. Claim mode (claim verdicts replacing groundedness) is not covered.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ragbatch.calibrate._row_view import JUDGMENT_NAMES, row_view, signals_from
from ragbatch.core import ConfigError, Diagnosis, Route

JUDGMENTS: tuple[str, ...] = JUDGMENT_NAMES  # chunkRelevance: the best chunk; correctness:
# reference rows only
CHUNK, SUFFICIENCY, CONFLICT, RELEVANCE, GROUNDED, CONTRADICTION, CORRECTNESS = range(7)
LOW, BAND, HIGH, ABSENT = range(4)

Signals = tuple[float | None, ...]
"""One row's P(true) per judgment, in ``JUDGMENTS`` order; None = not asked."""
Pair = tuple[float, float]
MIN_TIE_BLOCK = 10

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


def signals_of(row: Mapping[str, Any]) -> Signals:
    """The signals of a report row (or any mapping with ``retrieval``/``generation`` blocks),
    read through the report's models (:mod:`ragbatch.calibrate._row_view`).

    Raises :class:`ConfigError` when a judgment every row is asked is missing.
    """
    view = row_view(row)
    return signals_from(view.id, view.retrieval, view.generation)


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


def judgment_label(name: str, expected: str, sig: Signals) -> bool | None:
    """The truth of judgment ``name`` that the expected diagnosis implies (None: unknown).

    GENERATOR_UNGROUNDED does not say which of groundedness and contradiction failed; the
    row's other answer settles it (a contradiction answered below 0.5 blames groundedness).
    """
    label = implied_labels(expected).get(name)
    if label is None and expected == "GENERATOR_UNGROUNDED":
        other = sig[CONTRADICTION] if name == "groundedness" else sig[GROUNDED]
        if name == "groundedness" and other is not None and other < 0.5:
            return False
        if name == "contradiction" and other is not None and other >= 0.5:
            return True
    return label


def tie_blocks(
    answers: Iterable[tuple[int, float, str, Signals]], target: float
) -> list[tuple[str, float, int, int]]:
    """Blocks of answers exactly 0 or 1 on one judgment that disagree with their labels.

    Such answers are low or high under every valid threshold, so no threshold can send the
    block to the fallback judge. ``answers``: (judgment index, answer, the diagnosis that
    labels it, the signals beside it), as ``_labelled.labelled_answers`` gives them. Returns
    (judgment, value, answers with a label, wrong ones) for every block of at least
    ``MIN_TIE_BLOCK`` labelled answers whose error rate exceeds the target, largest first.
    """
    size: Counter[tuple[str, float]] = Counter()
    wrong: Counter[tuple[str, float]] = Counter()
    for j, p, expected, sig in answers:
        if p not in (0.0, 1.0):
            continue
        name = JUDGMENTS[j]
        label = judgment_label(name, expected, sig)
        if label is None:
            continue
        size[(name, p)] += 1
        wrong[(name, p)] += label != (p == 1.0)
    found = [
        (name, value, n, wrong[(name, value)])
        for (name, value), n in size.items()
        if n >= MIN_TIE_BLOCK and wrong[(name, value)] > target * n
    ]
    return sorted(found, key=lambda b: (-b[2], b[0], b[1]))


def tie_sentence(blocks: Sequence[tuple[str, float, int, int]]) -> str:
    """One clause naming each tie block (empty when there is none)."""
    return "".join(
        f"; {n} labelled rows answer {name} = {value:g} exactly, so no threshold can separate "
        f"them (they never go to the fallback judge), and {k} of them ({k / n:.0%}) disagree "
        "with their labels"
        for name, value, n, k in blocks
    )
