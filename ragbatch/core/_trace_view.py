"""A judged trace seen as a row: the turn that decided it, flattened (pure: no I/O).

What reads a row and not a trace sees this view: the fallback judge (it judges the turn the
trace's verdict is about), the run record, slices by question length, and the exports, whose
``spans`` then name the deciding hop and answer. The verdict itself is always the trace's
(docs/semantics.md §8); the view never changes it.
"""

from __future__ import annotations

from ragbatch.core._schema import Context, Expected, Row, Spans
from ragbatch.core._trace import AnswerStep, RetrievalStep, Trace, Turn, UserStep, turns_of


def deciding_turn(trace: Trace, step: int | None) -> Turn:
    """The turn holding ``step`` (the deciding step); the last turn when it is None."""
    turns = turns_of(trace)
    if step is None:
        return turns[-1]
    return next(t for t in reversed(turns) if t.user <= step)


def trace_view(trace: Trace, step: int | None) -> Row:
    """The deciding turn as a row: its question, its hops' documents (each id once, first
    retrieved first), its last answer; the trace's labels, metadata and ids."""
    turn = deciding_turn(trace, step)
    question = trace.steps[turn.user]
    answer = trace.steps[turn.answers[-1]]
    assert isinstance(question, UserStep) and isinstance(answer, AnswerStep)
    contexts: dict[str, Context] = {}
    first_hop: str | None = None
    for index in turn.hops:
        hop = trace.steps[index]
        assert isinstance(hop, RetrievalStep)
        first_hop = first_hop or hop.span
        for context in hop.contexts:
            contexts.setdefault(context.id, context)
    is_last = turn.index == len(turns_of(trace)) - 1
    deciding = trace.steps[step] if step is not None else answer
    hop_span = deciding.span if isinstance(deciding, RetrievalStep) else first_hop
    root = trace.spans.root if trace.spans else None
    spans = Spans(root=root, retriever=hop_span, llm=answer.span)
    diagnosis = trace.expected.diagnosis if trace.expected else None
    return Row(
        id=trace.id,
        question=question.text,
        contexts=list(contexts.values()),
        answer=answer.text,
        reference_answer=trace.reference_answer if is_last else None,
        expected=Expected(diagnosis=diagnosis) if diagnosis is not None else None,
        baseline=trace.baseline,
        metadata=trace.metadata,
        trace_id=trace.trace_id,
        spans=spans if spans != Spans() else None,
    )
