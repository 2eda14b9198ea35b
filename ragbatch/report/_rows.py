"""Per-row results of the report: verdicts per mode, claims, usage (pure: no I/O)."""

from __future__ import annotations

from typing import Literal

from ragbatch.core import Decided, RowOutcome, is_veto
from ragbatch.metrics import (
    AnswerCheck,
    RowRanking,
    low_authority_support,
    supported_only_by_low_authority,
)
from ragbatch.report._models import (
    ClaimOut,
    ClaimSummaryOut,
    RowError,
    RowResult,
    RowVerdict,
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
    )


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
