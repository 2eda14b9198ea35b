"""Per-row results of the report: verdicts per mode, claims, usage (pure: no I/O)."""

from __future__ import annotations

from typing import Literal

from ragbatch.core import (
    AnswerStep,
    Decided,
    RetrievalStep,
    RowOutcome,
    TraceJudged,
    is_veto,
    turns_of,
)
from ragbatch.metrics import (
    AnswerCheck,
    RowRanking,
    first_failing_step_match,
    low_authority_support,
    supported_only_by_low_authority,
)
from ragbatch.report._models import (
    ClaimOut,
    ClaimSummaryOut,
    RowError,
    RowResult,
    RowVerdict,
    StepResult,
    UsageTotals,
)


def _verdict(d: Decided, source: Literal["jev", "baseline"], model: str | None) -> RowVerdict:
    if d.diagnosis is None:
        f = d.failure
        error = RowError(kind=f.kind, message=f.message) if f else None
        return RowVerdict(status="failed", error=error)
    return RowVerdict(
        status="ok",
        diagnosis=d.diagnosis,
        confidence=d.confidence,
        source=source,
        model=model,
    )


def row_result(
    o: RowOutcome,
    base: Decided,
    cascade: Decided,
    routed: bool,
    ranking: RowRanking | None = None,
    check: AnswerCheck | None = None,
) -> RowResult:
    j = o.jev
    reply, verdict = j.reply, j.verdict
    base_model = o.baseline.reply.model if o.baseline.reply else None
    baseline = _verdict(base, "baseline", base_model)
    usage = None
    if reply:
        tokens_in = tokens_out = 0
        for r in j.replies:
            tokens_in += r.usage.input_tokens
            tokens_out += r.usage.output_tokens
        usage = UsageTotals(calls=len(j.replies), input_tokens=tokens_in, output_tokens=tokens_out)
    return RowResult(
        id=o.row.id,
        decision_id=o.decision.decision_id,
        decision_version=o.decision.version,
        decision_variant=o.decision.variant,
        status="ok" if verdict else "failed",
        error=RowError(kind=j.failure.kind, message=j.failure.message) if j.failure else None,
        retrieval=j.judgments.retrieval if j.judgments else None,
        generation=j.judgments.generation if j.judgments else None,
        diagnosis=verdict.diagnosis if verdict else None,
        confidence=verdict.confidence if verdict else None,
        route=verdict.route if verdict else "failed",
        model=reply.model if reply else None,
        latency_ms=j.latency_ms,
        usage=usage,
        expected=o.row.expected.diagnosis if o.row.expected else None,
        baseline=baseline,
        # routed, the cascade's verdict is the baseline's (the same diagnosis, confidence
        # and failure: cascade_decided takes them from it)
        cascade=baseline if routed else _verdict(cascade, "jev", reply.model if reply else None),
        claims=claim_rows(o) if j.claims is not None else None,
        claim_summary=claim_summary_out(o) if j.claim_summary is not None else None,
        retrieval_ranking=ranking,
        answer_check=check,
        trace_id=o.row.trace_id,
        spans=o.row.spans,
        low_authority_support=low_authority_support(o),
        query_tokens=len(o.row.question.split()),
        metadata=o.row.metadata,
        **(trace_fields(j.trace) if j.trace is not None else {}),
    )


def trace_fields(judged: TraceJudged) -> dict[str, object]:
    """A trace's own fields of its row: the deciding and first failing steps, its size, and
    every step with its kind, turn, judgments and verdict (docs/semantics.md §8)."""
    trace, verdict = judged.trace, judged.verdict
    by_step = {s.step: s for s in verdict.steps} if verdict is not None else {}
    turns = turns_of(trace)
    turn_of: dict[int, int] = {}  # a turn runs from its user step to the next one's
    for turn, following in zip(turns, [*turns[1:], None], strict=True):
        end = following.user if following is not None else len(trace.steps)
        turn_of |= dict.fromkeys(range(turn.user, end), turn.index)
    steps = []
    for index, step in enumerate(trace.steps):
        judgments = judged.judgments.get(index)
        stepped = by_step.get(index)
        labels = step.expected if isinstance(step, RetrievalStep | AnswerStep) else None
        steps.append(
            StepResult(
                index=index,
                kind=step.kind,
                turn=turn_of[index],
                span=step.span,
                decision_id=judged.decisions.get(index),
                retrieval=judgments.retrieval
                if isinstance(step, RetrievalStep) and judgments
                else None,
                generation=judgments.generation
                if isinstance(step, AnswerStep) and judgments
                else None,
                diagnosis=stepped.verdict.diagnosis if stepped else None,
                confidence=stepped.verdict.confidence if stepped else None,
                recovered=True if stepped and stepped.recovered else None,
                no_retrieval=True if stepped and stepped.no_retrieval else None,
                expected=labels.diagnosis if labels else None,
            )
        )
    return {
        "deciding_step": verdict.deciding_step if verdict else None,
        "first_failing_step": verdict.first_failing_step if verdict else None,
        "first_failing_step_match": first_failing_step_match(judged),
        "hops": sum(1 for s in trace.steps if s.kind == "retrieval"),
        "turns": len(turns),
        "wasted_hops": verdict.wasted_hops if verdict else None,
        "steps": steps,
    }


def claim_rows(o: RowOutcome) -> list[ClaimOut]:
    labels = (o.row.expected.claims if o.row.expected else None) or {}
    by_id = {c.id: c for c in o.row.contexts}

    def sources(ids: tuple[str, ...]) -> list[str] | None:
        found = [s for cid in ids if (s := by_id[cid].source) is not None]
        return found or None

    def authority(ids: tuple[str, ...]) -> list[str] | None:
        found = [str(a) for cid in ids if (a := by_id[cid].authority) is not None]
        return found or None

    return [
        ClaimOut(
            id=r.claim.id,
            start=r.claim.start or 0,
            end=r.claim.end or 0,
            citations=list(r.claim.citations),
            impact=r.claim.impact,
            evidence=list(r.evidence),
            verdict=r.verdict,
            probabilities=r.probabilities,
            confidence=r.confidence,
            uncertain=r.uncertain,
            veto=is_veto(r),
            expected=labels.get(r.claim.id),
            trace_id=o.row.trace_id,
            sources=sources(r.evidence),
            authority=authority(r.evidence),
        )
        for r in o.jev.claims or ()
    ]


def claim_summary_out(o: RowOutcome) -> ClaimSummaryOut:
    s = o.jev.claim_summary
    assert s is not None
    return ClaimSummaryOut(
        claims=s.claims,
        factual_claims=s.factual_claims,
        supported=s.supported,
        coverage=s.coverage,
        answer_fails=s.answer_fails,
        vetoed_by=list(s.vetoed_by),
        uncertain=list(s.uncertain),
        supported_only_by_low_authority=supported_only_by_low_authority(o.row, o.jev.claims or ()),
        mean_support_probability=s.mean_support_probability,
    )
