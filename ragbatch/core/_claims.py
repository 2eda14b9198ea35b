"""Claim mode: atomic claims, their support questions and the answer-level veto (pure: no I/O).

The semantics are docs/semantics.md §1a.

Claim extraction is a generation task, so it is not part of the Jev decision contract: a
:class:`ClaimExtractor` supplies the claims (``provided``: the row's own; ``sentences``: a
deterministic sentence split by pysbd, which knows abbreviations, decimals and ellipses). Jev then answers one four-way ``choice`` per claim against the
evidence the state carries: in ``cited`` scope only the passages the claim cites (an uncited
passage must not rescue a bad citation), in ``context`` scope every retrieved passage. Claims
that share the same evidence share one request. A claim without citations in ``cited`` scope
is not sent and counts as unsupported (``missing-citation``), never as a neutral score.

Aggregation never averages a severe claim away: the answer fails when any claim is confidently
contradicted, or any material (high or normal impact) claim is confidently unsupported.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from ragbatch.core._questions import CLAIM_PREFIX
from ragbatch.core._schema import CLAIM_OPTIONS, Claim, Row
from ragbatch.core._wire import JevRequest, Question

Scope = Literal["cited", "context"]
MISSING_CITATION = "missing-citation"
VETO_RULE = (
    "The answer fails when any claim is contradicted, or any claim of high or normal impact is "
    "insufficient or has no citation; a claim counts only when its top option has probability "
    ">= the pass threshold (otherwise it is uncertain and the row goes to the fallback judge). "
    "Low-impact and not_applicable claims never fail an answer."
)
SUPPORT_QUESTION_TEXT = "How does the evidence relate to this claim?"
SUPPORT_CRITERIA: dict[str, str | None] = {
    "supported": "The evidence establishes the full claim",
    "contradicted": "The evidence conflicts with the claim",
    "insufficient": "The evidence neither establishes nor conflicts with the full claim",
    "not_applicable": "The text is not a factual claim requiring this evidence",
}


@runtime_checkable
class ClaimExtractor(Protocol):
    """Supplies a row's claims. An LLM extractor can implement this later (async wrapper)."""

    name: str

    def extract(self, row: Row) -> list[Claim]: ...


class AsyncClaimExtractor(Protocol):
    """An extractor that calls a model (e.g. the LLM extractor): awaited by the runner."""

    name: str

    async def extract_async(self, row: Row) -> list[Claim]: ...

    async def aclose(self) -> None: ...


class ProvidedClaims:
    """The claims the row carries (offsets checked or found when the row was read)."""

    name = "provided"

    def extract(self, row: Row) -> list[Claim]:
        return list(row.claims or [])


class SentenceClaims:
    """One claim per sentence of the answer, offsets kept, no citations (deterministic).

    pysbd finds where sentences start ("1.5 %", "e.g.", "Dr." and "…" do not end one); the
    claims are the answer's own text between those starts, space trimmed, so
    ``answer[start:end] == text`` always holds and no character of the answer is dropped
    (pysbd leaves out trailing punctuation such as the "??" of "a. ??").
    """

    name = "sentences"

    def __init__(self) -> None:
        self._segmenter: Any = None  # pysbd's, made on first use (not at start-up)

    def sentence_starts(self, answer: str) -> list[int]:
        if self._segmenter is None:
            import pysbd

            self._segmenter = pysbd.Segmenter(language="en", clean=False)
        starts = [0]
        cursor = 0
        for sentence in self._segmenter.segment(answer):
            stripped = sentence.strip()
            found = answer.find(stripped, cursor) if stripped else -1
            if found < 0:  # nothing to anchor on: the text stays with the sentence before
                continue
            if found > starts[-1]:
                starts.append(found)
            cursor = found + len(stripped)
        return starts

    def extract(self, row: Row) -> list[Claim]:
        answer = row.answer
        starts = self.sentence_starts(answer)
        claims: list[Claim] = []
        for begin, end in zip(starts, [*starts[1:], len(answer)], strict=True):
            piece = answer[begin:end]
            text = piece.strip()
            if not text:
                continue
            start = begin + piece.index(text)
            claims.append(
                Claim(id=f"s{len(claims) + 1}", text=text, start=start, end=start + len(text))
            )
        return claims


EXTRACTORS: dict[str, ClaimExtractor] = {
    "provided": ProvidedClaims(),
    "sentences": SentenceClaims(),
}


def support_question(claim: Claim) -> Question:
    return Question(
        type="choice",
        instructions=f"{SUPPORT_QUESTION_TEXT} Claim: {claim.text}",
        criteria=dict(SUPPORT_CRITERIA),
    )


@dataclass(frozen=True, slots=True)
class ClaimGroup:
    """Claims judged against the same evidence, asked in one request."""

    evidence: tuple[str, ...]
    claims: tuple[Claim, ...]
    request: JevRequest


def evidence_of(claim: Claim, row: Row, scope: Scope) -> tuple[str, ...]:
    if scope == "context":
        return tuple(c.id for c in row.contexts)
    cited = set(claim.citations)
    return tuple(c.id for c in row.contexts if c.id in cited)  # retrieval order


def claim_groups(row: Row, claims: Sequence[Claim], scope: Scope, model: str) -> list[ClaimGroup]:
    """One request per distinct evidence set; claims without evidence in cited scope are not sent."""
    by_evidence: dict[tuple[str, ...], list[Claim]] = {}
    for claim in claims:
        evidence = evidence_of(claim, row, scope)
        if scope == "cited" and not evidence:
            continue
        by_evidence.setdefault(evidence, []).append(claim)
    texts = {c.id: c.text for c in row.contexts}
    groups = []
    for evidence, members in by_evidence.items():
        state = {"passages": [{"id": cid, "text": texts[cid]} for cid in evidence]}
        questions = {f"{CLAIM_PREFIX}{c.id}": support_question(c) for c in members}
        request = JevRequest(model=model, state=state, questions=questions)
        groups.append(ClaimGroup(evidence, tuple(members), request))
    return groups


@dataclass(frozen=True, slots=True)
class ClaimResult:
    claim: Claim
    evidence: tuple[str, ...]
    verdict: str  # one of CLAIM_OPTIONS or MISSING_CITATION
    probabilities: dict[str, float] | None
    confidence: float
    uncertain: bool

    @property
    def is_factual(self) -> bool:
        return self.verdict != "not_applicable"

    @property
    def is_supported(self) -> bool:
        return self.verdict == "supported"


def top_option(probabilities: Mapping[str, float]) -> tuple[str, float]:
    """Highest probability; ties go to the earlier option of the taxonomy."""
    best = max(CLAIM_OPTIONS, key=lambda o: (probabilities.get(o, 0.0), -CLAIM_OPTIONS.index(o)))
    return best, probabilities.get(best, 0.0)


def claim_result(
    claim: Claim,
    evidence: tuple[str, ...],
    probabilities: Mapping[str, float] | None,
    confident: float,
) -> ClaimResult:
    """A claim's verdict from its option probabilities (None: not sent, missing citation)."""
    if probabilities is None:
        return ClaimResult(claim, evidence, MISSING_CITATION, None, 1.0, False)
    verdict, confidence = top_option(probabilities)
    probs = {o: probabilities.get(o, 0.0) for o in CLAIM_OPTIONS}
    return ClaimResult(claim, evidence, verdict, probs, confidence, confidence < confident)


def is_veto(result: ClaimResult) -> bool:
    """Does this claim, on its own, fail the answer?"""
    if result.uncertain:
        return False
    if result.verdict == "contradicted":
        return True
    material = result.claim.impact != "low"
    return material and result.verdict in ("insufficient", MISSING_CITATION)


def label_fails(labels: Sequence[tuple[str, str]]) -> bool:
    """The veto rule applied to adjudicated labels: (label, impact) per claim.

    Pass ``missing-citation`` as the label of a claim that was not sent for lack of a
    citation: the rule fails a material uncited claim whatever its relation to the context.
    """
    return any(
        label == "contradicted" or (label in ("insufficient", MISSING_CITATION) and impact != "low")
        for label, impact in labels
    )


@dataclass(frozen=True, slots=True)
class ClaimSummary:
    claims: int
    factual_claims: int
    supported: int
    coverage: float
    answer_fails: bool
    vetoed_by: tuple[str, ...]
    uncertain: tuple[str, ...]
    confidence: float
    mean_support_probability: float | None


def summarize_claims(results: Sequence[ClaimResult]) -> ClaimSummary:
    """Coverage, the answer-level verdict with its vetoing claims, and the uncertain claims."""
    factual = [r for r in results if r.is_factual]
    supported = sum(r.is_supported for r in factual)
    vetoes = [r for r in results if is_veto(r)]
    uncertain = [r for r in results if r.uncertain]
    if vetoes:
        confidence = max(r.confidence for r in vetoes)
    else:
        decided = [r.confidence for r in results if not r.uncertain]
        confidence = min(decided) if decided else 1.0
    support_ps = [r.probabilities["supported"] for r in factual if r.probabilities is not None]
    return ClaimSummary(
        claims=len(results),
        factual_claims=len(factual),
        supported=supported,
        coverage=supported / len(factual) if factual else 1.0,
        answer_fails=bool(vetoes),
        vetoed_by=tuple(r.claim.id for r in vetoes),
        uncertain=tuple(r.claim.id for r in uncertain),
        confidence=confidence,
        mean_support_probability=math.fsum(support_ps) / len(support_ps) if support_ps else None,
    )
