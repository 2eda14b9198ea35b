"""A labelled multi-step trace as the threshold search sees it (pure: no I/O).

The search works on statuses: under a candidate's thresholds each answer is low, in the band
or high (:mod:`ragbatch.calibrate._rules`). A row has one answer per judgment; a trace has
one per judgment of every step the trace policy reads (docs/semantics.md §8: its answers,
and the hops before an answer of their turn), laid out in step order as its ``signals``,
the judgment of each in ``slots``.

The trace's step structure is rebuilt from its report row (``_trace_row``). Its
diagnosis under a status vector is the trace policy's (:func:`ragbatch.core.diagnose_trace`)
restated over statuses, as :mod:`ragbatch.calibrate._rules` restates the row table: a hop is
the row rule on its three judgments with the answer's judgments on their good side, an
answer the row rule on its judgments with the retrieval's on their good side (or a miss
with no retrieval before it in its turn), and the walk over the deciding steps (recovered
hops, showcase or guarded) is §8's. ``tests/calibrate/test_trace_calibrate.py`` checks that
it agrees with ``diagnose_trace`` on random traces and per-judgment thresholds, both
routings; the hot loops call it, so it walks precomputed positions and tables.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ragbatch.calibrate._rules import (
    ABSENT,
    BAND,
    CHUNK,
    CONFLICT,
    CONTRADICTION,
    CORRECTNESS,
    GROUNDED,
    HIGH,
    JUDGMENTS,
    LOW,
    RELEVANCE,
    SUFFICIENCY,
    Decide,
    Signals,
    decide,
    decide_guarded,
)
from ragbatch.core import Diagnosis, RetrievalStep, Trace, turns_of


@dataclass(frozen=True, slots=True)
class JudgedStep:
    """One step the trace policy reads: where its answers lie in the trace's signals."""

    index: int  # in the trace's steps
    kind: str  # "retrieval" or "answer"
    first: int  # its first position in the signals
    slots: tuple[int, ...]  # its judgments (JUDGMENTS indices), in order
    expected: str | None  # the step's own label (estimates only, never the guarantee)

    def signals(self, signals: Signals) -> Signals:
        """The step's answers as a row's signals (None where the step has no such judgment)."""
        out: list[float | None] = [None] * len(JUDGMENTS)
        for offset, j in enumerate(self.slots):
            out[j] = signals[self.first + offset]
        return tuple(out)

    def position(self, j: int) -> int:
        """The position of judgment ``j``'s answer in the trace's signals (-1: not asked)."""
        return self.first + self.slots.index(j) if j in self.slots else -1


@dataclass(frozen=True, slots=True)
class _Answer:
    """One answer of the walk: its positions, and the hops it reads (indices in ``hops``)."""

    positions: tuple[int, int, int, int]  # relevance, groundedness, contradiction, correctness
    has_evidence: bool  # a hop of its turn before it returned documents
    before: tuple[int, ...]  # the hops of its turn before it
    segment: tuple[int, ...]  # those since the previous user or answer step


class TracePlan:
    """A trace's step structure and how its signals map to judgments; diagnoses any status
    vector of its signals as the trace policy would (module docstring)."""

    __slots__ = (
        "_answers",
        "_hops",
        "_rules",
        "ascending",
        "at",
        "distinct",
        "order",
        "slots",
        "steps",
        "trace",
        "values",
    )

    def __init__(
        self, trace: Trace, steps: tuple[JudgedStep, ...], values: tuple[float, ...]
    ) -> None:
        self.trace = trace
        self.steps = steps
        self.values = values  # the answers (the sample's signals, none missing)
        self.slots = tuple(j for step in steps for j in step.slots)
        # Each judgment's positions, by rising answer, and its distinct answers.
        self.at = tuple(
            tuple(
                sorted(
                    (i for i, slot in enumerate(self.slots) if slot == j), key=values.__getitem__
                )
            )
            for j in range(len(JUDGMENTS))
        )
        self.distinct = tuple(sorted({values[i] for i in at}) for at in self.at)
        self.order = tuple(sorted(range(len(values)), key=values.__getitem__))  # every position
        self.ascending = tuple(values[i] for i in self.order)
        by_index = {step.index: step for step in steps}
        hops = [step for step in steps if step.kind == "retrieval"]
        self._hops = tuple(
            (s.position(CHUNK), s.position(SUFFICIENCY), s.position(CONFLICT)) for s in hops
        )
        hop_of = {step.index: k for k, step in enumerate(hops)}
        answers: list[_Answer] = []
        for turn in turns_of(trace):
            segment_start = turn.user
            for a in turn.answers:
                before = [h for h in turn.hops if h < a]
                step = by_index[a]
                answers.append(
                    _Answer(
                        positions=(
                            step.position(RELEVANCE),
                            step.position(GROUNDED),
                            step.position(CONTRADICTION),
                            step.position(CORRECTNESS),
                        ),
                        has_evidence=any(_has_documents(trace, h) for h in before),
                        before=tuple(hop_of[h] for h in before),
                        segment=tuple(hop_of[h] for h in before if h > segment_start),
                    )
                )
                segment_start = a
        self._answers = tuple(answers)
        self._rules: dict[Decide, Decide] = {
            decide: self._rule(decide, guarded=False),
            decide_guarded: self._rule(decide_guarded, guarded=True),
        }

    def rule(self, row_rule: Decide) -> Decide:
        """The trace's counterpart of a routing's row rule (``DECIDE[routing]``)."""
        return self._rules[row_rule]

    def layout(self) -> list[list[int]]:
        """[step index, judgment indices…] per read step: what the fit's digest records."""
        return [[step.index, *step.slots] for step in self.steps]

    def _rule(self, row: Decide, guarded: bool) -> Decide:
        hop_table, answer_table = _tables(row)
        hops = self._hops
        answers = [(a.before, a.segment, *a.positions, a.has_evidence) for a in self._answers]

        def rule(st: Sequence[int]) -> Diagnosis:
            verdicts = [
                hop_table[(ABSENT if c < 0 else st[c]) * 9 + st[s] * 3 + st[k]] for c, s, k in hops
            ]
            uncertain = False  # showcase: an uncertain deciding step, no failure yet
            for before, segment, r, g, d, c, evidence in answers:
                grounded = st[g] == HIGH and st[d] == LOW
                if not (grounded and any(verdicts[h] == "PASS" for h in before)):
                    for h in segment:  # not recovered: the segment's hops decide first
                        v = verdicts[h]
                        if v != "PASS":
                            if guarded or v != "JUDGE_UNCERTAIN":
                                return v
                            uncertain = True
                if not evidence:
                    return "RETRIEVAL_MISS"  # no retrieval before it: rule 2's miss
                said = answer_table[
                    st[r] * 36 + st[g] * 12 + st[d] * 4 + (ABSENT if c < 0 else st[c])
                ]
                if said != "PASS":
                    if guarded or said != "JUDGE_UNCERTAIN":
                        return said
                    uncertain = True
            return "JUDGE_UNCERTAIN" if uncertain else "PASS"

        return rule


_TABLES: dict[Decide, tuple[tuple[Diagnosis, ...], tuple[Diagnosis, ...]]] = {}


def _tables(row: Decide) -> tuple[tuple[Diagnosis, ...], tuple[Diagnosis, ...]]:
    """A hop's diagnosis by its statuses (chunk * 9 + sufficiency * 3 + conflict): the row rule
    with the answer's judgments on their good side; an answer's (relevance * 36 + groundedness
    * 12 + contradiction * 4 + correctness): the row rule with the retrieval's on theirs."""
    found = _TABLES.get(row)
    if found is None:
        statuses = (LOW, BAND, HIGH)
        hop = tuple(
            row([c, s, k, HIGH, HIGH, LOW, ABSENT])
            for c in (*statuses, ABSENT)
            for s in statuses
            for k in statuses
        )
        answer = tuple(
            row([HIGH, HIGH, LOW, r, g, d, c])
            for r in statuses
            for g in statuses
            for d in statuses
            for c in (*statuses, ABSENT)
        )
        found = _TABLES[row] = (hop, answer)
    return found


def _has_documents(trace: Trace, hop: int) -> bool:
    step = trace.steps[hop]
    return isinstance(step, RetrievalStep) and bool(step.contexts)
