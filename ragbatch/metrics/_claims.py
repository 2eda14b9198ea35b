"""Claim-mode metrics against adjudicated claim labels, and a lexical comparator (pure).

Jev's claim verdicts are scored per class (precision/recall/F1, confusion), for calibration
(ECE on the top option's probability), selectively (risk-coverage, AURC, coverage at
thresholds), for "no fit" (top option below a threshold: the taxonomy may not fit) and at the
answer level (the veto rule applied to predictions vs. to labels). A deterministic citation
check (token overlap between claim and evidence, no network) is scored on the identical
claims, so users see what Jev adds. Missing-citation claims are not judged by either and are
counted apart.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ragbatch.core import (
    MISSING_CITATION,
    VETO_RULE,
    ClaimResult,
    Row,
    RowOutcome,
    is_veto,
    label_fails,
)
from ragbatch.metrics import _scores as m
from ragbatch.metrics._scores import Calibration, Classification, Out, Selective

NO_FIT_THRESHOLD = 0.5
OVERLAP_SUPPORTED = 0.5
LOW_AUTHORITY = frozenset({"user-generated", "forum", "unknown"})
_TOKEN = re.compile(r"\w+")
_STOP = frozenset(
    [
        "a",
        "an",
        "the",
        "of",
        "to",
        "in",
        "on",
        "at",
        "for",
        "and",
        "or",
        "but",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "it",
        "its",
        "this",
        "that",
        "these",
        "those",
        "with",
        "by",
        "as",
        "from",
        "than",
        "then",
        "so",
        "not",
        "no",
        "yes",
        "do",
        "does",
        "did",
        "can",
        "could",
        "will",
        "would",
        "should",
        "may",
        "might",
        "per",
        "each",
        "all",
        "any",
        "our",
        "your",
        "their",
        "his",
        "her",
        "we",
        "you",
        "they",
        "i",
    ]
)


@dataclass(frozen=True, slots=True)
class ClaimRowInput:
    """One evaluated row in claim mode."""

    row: Row
    results: Sequence[ClaimResult]


class SliceStat(Out):
    value: str
    claims: int
    accuracy: float
    citation_check_accuracy: float


class Judge(Out):
    """One claim judge (Jev or the lexical check) on the labelled, judged claims."""

    claims: int
    classification: Classification
    calibration: Calibration
    selective: Selective
    answer_level_accuracy: float
    answer_level_rows: int


class ClaimMetrics(Judge):
    extractor: str
    scope: str
    veto_rule: str
    total_claims: int
    missing_citations: int
    no_fit_threshold: float
    no_fit_rate: float
    uncertain_rate: float
    rows_failed_by_veto: int
    answer_level_deferred: int  # rows with an uncertain claim: left to the fallback judge
    slices: dict[str, list[SliceStat]]
    citation_check: Judge


def tokens(text: str) -> set[str]:
    return {t for t in _TOKEN.findall(text.casefold()) if t not in _STOP}


def lexical_verdict(claim_text: str, evidence_text: str) -> tuple[str, float]:
    """Share of the claim's content words found in the evidence; supported above 0.5."""
    words = tokens(claim_text)
    if not words:
        return "not_applicable", 1.0
    overlap = len(words & tokens(evidence_text)) / len(words)
    if overlap >= OVERLAP_SUPPORTED:
        return "supported", overlap
    return "insufficient", 1.0 - overlap


def _evidence_text(row: Row, result: ClaimResult) -> str:
    texts = {c.id: c.text for c in row.contexts}
    return " ".join(texts[cid] for cid in result.evidence)


def _length_bucket(chars: int) -> str:
    return "<200" if chars < 200 else ("200-499" if chars < 500 else "500+")


def _rank_bucket(row: Row, result: ClaimResult) -> str:
    ranks = [i + 1 for i, c in enumerate(row.contexts) if c.id in result.claim.citations]
    if not ranks:
        return "uncited"
    best = min(ranks)
    return str(best) if best <= 3 else "4+"


def _authority(row: Row, result: ClaimResult) -> str:
    by_id = {c.id: c.authority for c in row.contexts}
    values = sorted({str(by_id[c]) for c in result.evidence if by_id.get(c) is not None})
    return "+".join(values) if values else "(none)"


def is_low_authority(value: str | float | None) -> bool:
    if value is None:
        return False
    if isinstance(value, float | int):
        return value < 0.5
    return value in LOW_AUTHORITY


def supported_only_by_low_authority(row: Row, results: Sequence[ClaimResult]) -> bool:
    """Every supported claim rests only on low-authority passages (and there is one)."""
    authority = {c.id: c.authority for c in row.contexts}
    supported = [r for r in results if r.is_supported and r.evidence]
    return bool(supported) and all(
        all(is_low_authority(authority.get(cid)) for cid in r.evidence) for r in supported
    )


def low_authority_support(o: RowOutcome) -> bool | None:
    """Judged grounded (p >= 0.5) while every relevant passage (p >= 0.5) has low authority.

    None when the row's contexts carry no authority at all.
    """
    row, j = o.row, o.jev.judgments
    if j is None or not any(c.authority is not None for c in row.contexts):
        return None
    grounded = j.generation.groundedness
    relevant = [c for c in row.contexts if j.retrieval.chunk_relevance.get(c.id, 0.0) >= 0.5]
    return (
        grounded is not None
        and grounded >= 0.5
        and bool(relevant)
        and all(is_low_authority(c.authority) for c in relevant)
    )


def _judge(items: Sequence[tuple[str, str, float]], answers_correct: int, answers: int) -> Judge:
    """items: (label, predicted, confidence) per claim; answer level: rows right, rows scored."""
    scored = [(c, label == pred) for label, pred, c in items]
    return Judge(
        claims=len(items),
        classification=m.classification([(label, pred) for label, pred, _ in items]),
        calibration=m.calibration(scored),
        selective=m.selective(scored),
        answer_level_accuracy=m.safe(answers_correct, answers),
        answer_level_rows=answers,
    )


class ClaimMetricsAccumulator:
    """Everything under ``modes.jevOnly.claims``, fed one claim-mode row at a time.

    Keeps no row: counters, slice counts, and per labelled claim one compact (label, verdict,
    confidence) tuple for Jev and one for the lexical check (the risk-coverage curve needs
    every claim, in order).
    """

    def __init__(self, extractor: str, scope: str, extra_slices: Sequence[str] = ()) -> None:
        self.extractor = extractor
        self.scope = scope
        self.extra_slices = tuple(extra_slices)
        self.jev: list[tuple[str, str, float]] = []
        self.lex: list[tuple[str, str, float]] = []
        # per slice dimension and value: [claims, Jev right, lexical check right]
        self.slices: dict[str, dict[str, list[int]]] = {}
        self.total = self.missing = self.uncertain = self.no_fit = self.judged = 0
        self.vetoed = self.deferred = 0
        self.jev_answers = self.jev_answers_correct = 0
        self.lex_answers = self.lex_answers_correct = 0

    def add(self, item: ClaimRowInput) -> None:
        row, results = item.row, item.results
        labels = (row.expected.claims if row.expected else None) or {}
        self.total += len(results)
        self.vetoed += any(is_veto(r) for r in results)
        lexical = {}
        for r in results:
            if r.verdict == MISSING_CITATION:
                self.missing += 1
                continue
            self.judged += 1
            self.uncertain += r.uncertain
            self.no_fit += r.confidence < NO_FIT_THRESHOLD
            evidence = _evidence_text(row, r)
            lexical[r.claim.id] = lexical_verdict(r.claim.text, evidence)
            label = labels.get(r.claim.id)
            if label is None:
                continue
            self.jev.append((label, r.verdict, r.confidence))
            self.lex.append((label, *lexical[r.claim.id]))
            meta = r.claim.metadata or {}
            keys = {
                "type": str(meta.get("type", "(none)")),
                "language": str(meta.get("language", "(none)")),
                "adversarial": str(meta.get("adversarial", "(none)")).lower(),
                "passageLength": _length_bucket(len(evidence)),
                "citedRank": _rank_bucket(row, r),
                "authority": _authority(row, r),
            }
            keys.update({k: str(meta.get(k, "(none)")) for k in self.extra_slices})
            for name, value in keys.items():
                stat = self.slices.setdefault(name, {}).setdefault(value, [0, 0, 0])
                stat[0] += 1
                stat[1] += label == r.verdict
                stat[2] += label == lexical[r.claim.id][0]
        if results and all(r.claim.id in labels for r in results):
            truth = label_fails(
                [
                    (MISSING_CITATION if r.verdict == MISSING_CITATION else labels[r.claim.id],
                     r.claim.impact)
                    for r in results
                ]
            )  # fmt: skip
            if any(r.uncertain for r in results):
                self.deferred += 1  # Jev leaves this answer to the fallback judge
            else:
                self.jev_answers += 1
                self.jev_answers_correct += any(is_veto(r) for r in results) == truth
            lex_fail = any(
                (r.verdict == MISSING_CITATION and r.claim.impact != "low")
                or (r.claim.id in lexical and lexical[r.claim.id][0] == "insufficient"
                    and r.claim.impact != "low")
                for r in results
            )  # fmt: skip
            self.lex_answers += 1
            self.lex_answers_correct += lex_fail == truth

    def result(self) -> ClaimMetrics:
        judge = _judge(self.jev, self.jev_answers_correct, self.jev_answers)
        slices = {
            name: [
                SliceStat(
                    value=v,
                    claims=n,
                    accuracy=m.safe(ok, n),
                    citation_check_accuracy=m.safe(lok, n),
                )
                for v, (n, ok, lok) in sorted(values.items())
            ]
            for name, values in self.slices.items()
        }
        return ClaimMetrics(
            **dict(judge),
            extractor=self.extractor,
            scope=self.scope,
            veto_rule=VETO_RULE,
            total_claims=self.total,
            missing_citations=self.missing,
            no_fit_threshold=NO_FIT_THRESHOLD,
            no_fit_rate=m.safe(self.no_fit, self.judged),
            uncertain_rate=m.safe(self.uncertain, self.judged),
            rows_failed_by_veto=self.vetoed,
            answer_level_deferred=self.deferred,
            slices=slices,
            citation_check=_judge(self.lex, self.lex_answers_correct, self.lex_answers),
        )


def claim_metrics(
    rows: Iterable[ClaimRowInput], extractor: str, scope: str, extra_slices: Sequence[str] = ()
) -> ClaimMetrics:
    """Everything under ``modes.jevOnly.claims``."""
    total = ClaimMetricsAccumulator(extractor, scope, extra_slices)
    for item in rows:
        total.add(item)
    return total.result()
