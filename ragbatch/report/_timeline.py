"""A trace's row as a timeline for the HTML report (pure: report rows and traces in, views out).

Each step of a trace (docs/semantics.md §8) in order: a turn's question, each hop with its
query and its documents (each with its relevance to the turn's question, ``chunkRelevance``,
and to the hop's own query, ``queryRelevance``), tool calls (name, input and output cut
short), answers; each judged step with its judgments and verdict, recovered hops and answers
without retrieval marked, and the step the trace's verdict is about highlighted (its first
failing step, else its deciding step). The report carries no texts: they come from the
traces themselves (``traces``: row id → the trace the run read), else the steps show their
kinds, document ids and judgments only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ragbatch.core import (
    AnswerStep,
    Context,
    GenerationJudgments,
    HopRetrieval,
    RetrievalStep,
    ToolStep,
    Trace,
    UserStep,
)
from ragbatch.report._models import PolicyInfo, RowResult, StepResult
from ragbatch.report._tables import num

DOCUMENT_CHARS = 280  # a document's text shown; the whole text is its tooltip
TOOL_CHARS = 160  # a tool call's input and output shown
HIGH_IS_BAD = {"contextConflict", "contradiction"}
KIND_TITLES = {"user": "question", "retrieval": "retrieval hop", "tool": "tool", "answer": "answer"}


@dataclass(frozen=True, slots=True)
class Score:
    """One judgment as shown: its name, P(true) and how it reads (good, bad or mid band)."""

    name: str
    value: str
    tone: str


@dataclass(frozen=True, slots=True)
class DocumentView:
    id: str
    source: str
    text: str
    full: str  # the whole text when ``text`` is cut short, else ""
    chunk: Score | None
    query: Score | None


@dataclass(frozen=True, slots=True)
class StepView:
    index: int
    kind: str
    title: str
    turn: int  # counted from 1, as people count turns
    state: str  # pass, fail, uncertain, or plain (a step that is not judged)
    text: str = ""  # a question's or an answer's text
    query: str | None = None
    documents: list[DocumentView] = field(default_factory=list)
    tool_input: str = ""
    tool_output: str = ""
    scores: list[Score] = field(default_factory=list)
    verdict: str = ""
    confidence: str = ""
    marks: list[str] = field(default_factory=list)
    highlight: str = ""  # "first failing step", "deciding step" or ""
    recovered: bool = False
    expected: str = ""
    mismatch: bool = False
    span: str = ""


@dataclass(frozen=True, slots=True)
class TraceView:
    anchor: str
    id: str
    diagnosis: str
    state: str  # pass, fail or uncertain: how the verdict reads
    confidence: str
    route: str
    verdict_note: str  # the fallback judge's verdict, when it decided the trace
    expected: str
    mismatch: bool
    facts: list[str]
    steps: list[StepView]
    has_texts: bool
    multi_turn: bool
    ids: str  # the trace's trace id and root span, when it has them


def cut(text: str, limit: int) -> str:
    """``text`` up to ``limit`` characters, an ellipsis where it was cut."""
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def compact(value: Any) -> str:
    """A tool's input or output on one line: text with its whitespace collapsed, anything
    else as JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return " ".join(value.split())
    return json.dumps(value, ensure_ascii=False, default=str)


class Tones:
    """How a judgment reads under the run's thresholds (per judgment where the policy has
    them): ``good``, ``bad`` or ``mid`` (the uncertain band)."""

    def __init__(self, policy: PolicyInfo) -> None:
        self.default = (policy.fail_threshold, policy.pass_threshold)
        self.bounds = dict(policy.per_judgment or {})

    def score(self, name: str, label: str, value: float | None) -> Score | None:
        if value is None:
            return None
        fail, pass_ = self.bounds.get(name, self.default)
        high, low = ("bad", "good") if name in HIGH_IS_BAD else ("good", "bad")
        tone = high if value >= pass_ else low if value <= fail else "mid"
        return Score(label, num(value, 2), tone)


def documents(
    contexts: Sequence[Context] | None, judged: HopRetrieval | None, tones: Tones
) -> list[DocumentView]:
    """A hop's documents in rank order (ids from the judgments when the texts are absent)."""
    chunk = judged.chunk_relevance if judged else {}
    query = judged.query_relevance if judged else {}
    known = list(contexts) if contexts is not None else [Context(id=i, text="") for i in chunk]
    return [
        DocumentView(
            id=c.id,
            source=c.source or "",
            text=cut(c.text, DOCUMENT_CHARS),
            full=c.text if len(c.text) > DOCUMENT_CHARS else "",
            chunk=tones.score("chunkRelevance", "question", chunk.get(c.id)),
            query=tones.score("chunkRelevance", "query", query.get(c.id)),
        )
        for c in known
    ]


def hop_scores(judged: HopRetrieval | None, tones: Tones) -> list[Score]:
    if judged is None:
        return []
    found = [
        tones.score("contextSufficiency", "sufficiency", judged.sufficiency),
        tones.score("contextConflict", "conflict", judged.conflict),
    ]
    return [s for s in found if s is not None]


def answer_scores(judged: GenerationJudgments | None, tones: Tones) -> list[Score]:
    if judged is None:
        return []
    found = [
        tones.score("answerRelevance", "relevance", judged.relevance),
        tones.score("groundedness", "groundedness", judged.groundedness),
        tones.score("contradiction", "contradiction", judged.contradiction),
        tones.score("correctness", "correctness", judged.correctness),
    ]
    return [s for s in found if s is not None]


def state_of(diagnosis: str | None) -> str:
    if diagnosis is None:
        return "plain"
    return {"PASS": "pass", "JUDGE_UNCERTAIN": "uncertain"}.get(diagnosis, "fail")


def step_view(
    result: StepResult,
    step: UserStep | RetrievalStep | ToolStep | AnswerStep | None,
    row: RowResult,
    tones: Tones,
) -> StepView:
    """One step: ``step`` is the trace's own (its texts), or None when it is not known."""
    marks = []
    if result.recovered:
        marks.append("recovered by another hop of its turn")
    if result.no_retrieval:
        marks.append("no retrieval before it in its turn")
    highlight = ""
    if result.index == row.first_failing_step:
        highlight = "first failing step"
    elif result.index == row.deciding_step:
        highlight = "deciding step"
    title = KIND_TITLES[result.kind]
    view: dict[str, Any] = {}
    if isinstance(step, UserStep | AnswerStep):
        view["text"] = step.text
    if result.kind == "retrieval":
        contexts = step.contexts if isinstance(step, RetrievalStep) else None
        view["query"] = step.query if isinstance(step, RetrievalStep) else None
        view["documents"] = documents(contexts, result.retrieval, tones)
        view["scores"] = hop_scores(result.retrieval, tones)
    elif result.kind == "answer":
        view["scores"] = answer_scores(result.generation, tones)
    elif isinstance(step, ToolStep):
        title = f"tool {step.name}"
        view["tool_input"] = cut(compact(step.input), TOOL_CHARS)
        view["tool_output"] = cut(compact(step.output), TOOL_CHARS)
    return StepView(
        index=result.index,
        kind=result.kind,
        title=title,
        turn=result.turn + 1,
        state=state_of(result.diagnosis),
        verdict=result.diagnosis or "",
        confidence=num(result.confidence, 2) if result.confidence is not None else "",
        marks=marks,
        highlight=highlight,
        recovered=bool(result.recovered),
        expected=result.expected or "",
        mismatch=result.expected is not None and result.expected != result.diagnosis,
        span=result.span or "",
        **view,
    )


def facts_of(row: RowResult) -> list[str]:
    turns, hops = row.turns or 0, row.hops or 0
    facts = [f"{turns} turn{'s' * (turns != 1)}", f"{hops} hop{'s' * (hops != 1)}"]
    if row.wasted_hops:
        facts.append(f"{row.wasted_hops} wasted hop{'s' * (row.wasted_hops != 1)}")
    if row.first_failing_step is not None:
        facts.append(f"first failing step {row.first_failing_step}")
    elif row.deciding_step is not None:
        facts.append(f"deciding step {row.deciding_step}")
    return facts


def trace_view(row: RowResult, n: int, trace: Trace | None, tones: Tones) -> TraceView:
    """Row ``n`` of the page (a trace's) as a timeline; ``trace``: its steps' texts."""
    steps = row.steps or []
    known = trace is not None and len(trace.steps) == len(steps)
    cascade = row.cascade
    decided_by_fallback = cascade.source == "baseline" and cascade.diagnosis is not None
    note = ""
    if decided_by_fallback:
        note = f"the fallback judge decided {cascade.diagnosis} ({num(cascade.confidence, 2)})"
    elif row.route == "fallback" and cascade.error is not None:
        note = f"the fallback judge gave no verdict ({cascade.error.kind})"
    diagnosis = row.diagnosis or (f"failed ({row.error.kind})" if row.error else "failed")
    root = row.spans.root if row.spans else None
    trace_id = row.trace_id if row.trace_id != row.id else None
    ids = " · ".join(
        f"{what} {value}" for what, value in (("trace", trace_id), ("root span", root)) if value
    )
    return TraceView(
        anchor=f"trace-{n}",
        id=row.id,
        diagnosis=diagnosis,
        state=state_of(row.diagnosis) if row.diagnosis else "fail",
        confidence=num(row.confidence, 2) if row.confidence is not None else "—",
        route=row.route,
        verdict_note=note,
        expected=row.expected or "",
        mismatch=row.expected is not None and row.expected != row.diagnosis,
        facts=facts_of(row),
        steps=[
            step_view(s, trace.steps[s.index] if known and trace else None, row, tones)
            for s in steps
        ],
        has_texts=known,
        multi_turn=(row.turns or 0) > 1,
        ids=ids,
    )


def trace_views(
    rows: Sequence[RowResult], policy: PolicyInfo, traces: Mapping[str, Trace] | None
) -> list[TraceView]:
    """The timelines of the trace rows among ``rows`` (the page's), in row order."""
    tones = Tones(policy)
    given = traces or {}
    return [
        trace_view(row, n, given.get(row.id), tones)
        for n, row in enumerate(rows, start=1)
        if row.steps is not None
    ]
