"""The ``traces`` section as tables and one summary line: where traces fail (pure: no I/O).

By the kind of the first failing step and its diagnosis, by hop position within a turn, by
turn, wasted hops, the first failing step against its labels, and judged steps against their
own labels (docs/semantics.md §8a). Shared by the Markdown and HTML views through
:func:`ragbatch.report._tables.report_tables`; numbers are rounded here only.
"""

from __future__ import annotations

from ragbatch.metrics import Component, TraceMetrics
from ragbatch.report._tables import Table, num, pct

KIND_NAMES = {"retrieval": "hop (retrieval)", "answer": "answer"}
JUDGMENT_WORDS = {
    "chunkRelevance": "chunk relevance",
    "contextSufficiency": "context sufficiency",
    "contextConflict": "context conflict",
    "answerRelevance": "answer relevance",
    "groundedness": "groundedness",
    "contradiction": "contradiction",
    "correctness": "correctness",
}


def ordinal(n: int) -> str:
    """1 -> "1st", 2 -> "2nd", 11 -> "11th", 23 -> "23rd"."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def plural(count: int, word: str) -> str:
    """ "1 trace", "2 traces"."""
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _count_share(count: int, total: int) -> str:
    return f"{count} ({pct(count / total if total else 0.0)})"


def first_failing_text(t: TraceMetrics) -> str:
    """The first failing step against ``expected.firstFailingStep``, in words."""
    a = t.first_failing_step_accuracy
    if a is None:
        return "No trace labels its first failing step (expected.firstFailingStep)."
    return (
        f"First failing step as labelled: {a.correct}/{a.judged} judged traces "
        f"({pct(a.accuracy)}); {a.too_early} too early, {a.too_late} too late, {a.uncertain} "
        f"undecided (JUDGE_UNCERTAIN); {a.labelled} traces label it."
    )


def first_failing_table(t: TraceMetrics) -> Table:
    """The traces that failed, by the kind of their first failing step and its diagnosis."""
    f = t.first_failing_step
    rows = tuple(
        (
            KIND_NAMES[kind],
            _count_share(k.traces, f.traces),
            ", ".join(f"{d} {n}" for d, n in k.by_diagnosis.items()) or "—",
        )
        for kind, k in f.by_kind.items()
    )
    note = (
        f"{t.traces} traces: {t.judged} judged, {t.failures} failed calls; {t.passed} passed, "
        f"{f.traces} failed ({pct(f.rate)}), {t.uncertain} undecided (sent to the fallback). "
        f"Answers given with no retrieval in their turn: {f.no_retrieval} of the failures. "
        f"Hops per trace: mean {num(t.hops_per_trace.mean, 2)}, max {t.hops_per_trace.max}; "
        f"turns per trace: mean {num(t.turns_per_trace.mean, 2)}, max "
        f"{t.turns_per_trace.max}. {first_failing_text(t)}"
    )
    headers = ("first failing step", "traces (share of failed)", "diagnoses")
    return Table("Where traces fail: first failing step", headers, rows, note)


def hop_position_table(t: TraceMetrics) -> Table:
    """Judged hops by their position within their turn (1st hop, 2nd hop, …)."""
    rows = tuple(
        (
            f"{ordinal(h.hop + 1)} hop",
            str(h.judged),
            str(h.failed),
            pct(h.failure_rate),
            str(h.uncertain),
            str(h.recovered),
            str(h.first_failing),
        )
        for h in t.by_hop_position
    )
    w, n = t.wasted_hops, t.no_retrieval
    note = (
        f"Wasted hops: {w.wasted} of {w.hops} judged hops ({pct(w.rate)}) in "
        f"{plural(w.traces, 'trace')}: failed hops another hop of their turn made good "
        f"(recovered). Answers with no retrieval: {n.no_retrieval} of {n.answers} judged "
        f"answers ({pct(n.rate)}) in {plural(n.traces, 'trace')}."
    )
    headers = ("hop of its turn", "judged", "failed", "failure rate", "undecided", "wasted",
               "first failure here")  # fmt: skip
    return Table("Where traces fail: by hop position", headers, rows, note)


def turn_table(t: TraceMetrics) -> Table:
    """Judged hops and answers by turn."""
    rows = tuple(
        (
            f"{ordinal(u.turn + 1)} turn",
            str(u.traces),
            f"{u.retrieval.failed}/{u.retrieval.judged}",
            f"{u.answer.failed}/{u.answer.judged}",
            str(u.retrieval.first_failing),
            str(u.answer.first_failing),
        )
        for u in t.by_turn
    )
    headers = ("turn", "traces", "hops failed", "answers failed", "first failure: hop",
               "first failure: answer")  # fmt: skip
    note = "Failed counts every failing verdict of a judged step, recovered hops included."
    return Table("Where traces fail: by turn", headers, rows, note)


def _component(kind: str, name: str, c: Component) -> tuple[str, ...]:
    scored = c.count > 0
    return (
        KIND_NAMES[kind],
        JUDGMENT_WORDS.get(name, name),
        str(c.count),
        pct(c.accuracy) if scored else "n/a",
        num(c.brier) if scored else "n/a",
        num(c.ece) if scored else "n/a",
    )


def step_label_tables(t: TraceMetrics) -> list[Table]:
    """Judged steps against their own labels: verdicts, then judgments (when labelled)."""
    if t.steps is None:
        return []
    verdicts = tuple(
        (
            KIND_NAMES[kind],
            str(c.rows),
            f"{pct(c.accuracy)} ({c.correct}/{c.successful})" if c.successful else "n/a",
            num(c.macro_f1) if c.successful else "n/a",
        )
        for kind, c in t.steps.classification.items()
    )
    judgments = tuple(
        _component(kind, name, c)
        for kind, names in t.steps.components.items()
        for name, c in names.items()
    )
    return [
        Table(
            "Trace steps against their labels",
            ("step", "labelled", "accuracy", "macro-F1"),
            verdicts,
            "Each judged step's verdict against its steps[].expected.diagnosis.",
        ),
        Table(
            "Trace step judgments against their labels",
            ("step", "judgment", "count", "accuracy", "Brier", "ECE"),
            judgments,
            "Accuracy at p ≥ 0.5; ECE on confidence max(p, 1 - p).",
        ),
    ]


def trace_tables(t: TraceMetrics | None) -> list[Table]:
    """Every table of the ``traces`` section; none for a run of rows alone."""
    if t is None:
        return []
    tables = [first_failing_table(t), hop_position_table(t), turn_table(t)]
    return tables + step_label_tables(t)


def trace_line(t: TraceMetrics | None) -> str | None:
    """The terminal summary's line about traces; None for a run of rows alone."""
    if t is None:
        return None
    f = t.first_failing_step
    hop, answer = f.by_kind["retrieval"].traces, f.by_kind["answer"].traces
    a = t.first_failing_step_accuracy
    labelled = (
        f"; first failing step as labelled {a.correct}/{a.judged} ({pct(a.accuracy)})"
        if a is not None
        else ""
    )
    return (
        f"  traces: {t.traces} ({num(t.hops_per_trace.mean, 2)} hops, "
        f"{num(t.turns_per_trace.mean, 2)} turns a trace), {f.traces} failed: first at a hop "
        f"in {hop}, at an answer in {answer} ({f.no_retrieval} with no retrieval); "
        f"{plural(t.wasted_hops.wasted, 'wasted hop')}{labelled}"
    )
