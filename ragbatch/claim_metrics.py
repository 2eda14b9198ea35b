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
from collections.abc import Sequence
from dataclasses import dataclass

from ragbatch import metrics as m
from ragbatch.claims import MISSING_CITATION, VETO_RULE, ClaimResult, is_veto, label_fails
from ragbatch.metrics import Calibration, Classification, Out, Selective
from ragbatch.outcome import RowOutcome
from ragbatch.schema import Row

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


def _judge(
    items: Sequence[tuple[str, str, float]], answer_pairs: Sequence[tuple[bool, bool]]
) -> Judge:
    """items: (label, predicted, confidence); answer_pairs: (predicted fails, label fails)."""
    scored = [(c, label == pred) for label, pred, c in items]
    return Judge(
        claims=len(items),
        classification=m.classification([(label, pred) for label, pred, _ in items]),
        calibration=m.calibration(scored),
        selective=m.selective(scored),
        answer_level_accuracy=m.safe(sum(p == y for p, y in answer_pairs), len(answer_pairs)),
        answer_level_rows=len(answer_pairs),
    )


def claim_metrics(
    rows: Sequence[ClaimRowInput], extractor: str, scope: str, extra_slices: Sequence[str] = ()
) -> ClaimMetrics:
    """Everything under ``modes.jevOnly.claims``."""
    jev: list[tuple[str, str, float]] = []
    lex: list[tuple[str, str, float]] = []
    slice_keys: list[dict[str, str]] = []
    jev_answers: list[tuple[bool, bool]] = []
    lex_answers: list[tuple[bool, bool]] = []
    total = missing = uncertain = no_fit = judged = vetoed = deferred = 0
    for item in rows:
        labels = (item.row.expected.claims if item.row.expected else None) or {}
        total += len(item.results)
        vetoed += any(is_veto(r) for r in item.results)
        lexical = {}
        for r in item.results:
            if r.verdict == MISSING_CITATION:
                missing += 1
                continue
            judged += 1
            uncertain += r.uncertain
            no_fit += r.confidence < NO_FIT_THRESHOLD
            lexical[r.claim.id] = lexical_verdict(r.claim.text, _evidence_text(item.row, r))
            label = labels.get(r.claim.id)
            if label is None:
                continue
            jev.append((label, r.verdict, r.confidence))
            lex.append((label, *lexical[r.claim.id]))
            meta = r.claim.metadata or {}
            keys = {
                "type": str(meta.get("type", "(none)")),
                "language": str(meta.get("language", "(none)")),
                "adversarial": str(meta.get("adversarial", "(none)")).lower(),
                "passageLength": _length_bucket(len(_evidence_text(item.row, r))),
                "citedRank": _rank_bucket(item.row, r),
                "authority": _authority(item.row, r),
            }
            keys.update({k: str(meta.get(k, "(none)")) for k in extra_slices})
            slice_keys.append(keys)
        if item.results and all(r.claim.id in labels for r in item.results):
            truth = label_fails(
                [
                    (MISSING_CITATION if r.verdict == MISSING_CITATION else labels[r.claim.id],
                     r.claim.impact)
                    for r in item.results
                ]
            )  # fmt: skip
            if any(r.uncertain for r in item.results):
                deferred += 1  # Jev leaves this answer to the fallback judge
            else:
                jev_answers.append((any(is_veto(r) for r in item.results), truth))
            lex_fail = any(
                (r.verdict == MISSING_CITATION and r.claim.impact != "low")
                or (r.claim.id in lexical and lexical[r.claim.id][0] == "insufficient"
                    and r.claim.impact != "low")
                for r in item.results
            )  # fmt: skip
            lex_answers.append((lex_fail, truth))
    judge = _judge(jev, jev_answers)
    slices: dict[str, list[SliceStat]] = {}
    for name in slice_keys[0] if slice_keys else {}:
        values: dict[str, list[int]] = {}
        for keys, (gold, pred, _), (_, lpred, _) in zip(slice_keys, jev, lex, strict=True):
            stat = values.setdefault(keys[name], [0, 0, 0])
            stat[0] += 1
            stat[1] += gold == pred
            stat[2] += gold == lpred
        slices[name] = [
            SliceStat(
                value=v, claims=n, accuracy=m.safe(ok, n), citation_check_accuracy=m.safe(lok, n)
            )
            for v, (n, ok, lok) in sorted(values.items())
        ]
    return ClaimMetrics(
        **dict(judge),
        extractor=extractor,
        scope=scope,
        veto_rule=VETO_RULE,
        total_claims=total,
        missing_citations=missing,
        no_fit_threshold=NO_FIT_THRESHOLD,
        no_fit_rate=m.safe(no_fit, judged),
        uncertain_rate=m.safe(uncertain, judged),
        rows_failed_by_veto=vetoed,
        answer_level_deferred=deferred,
        slices=slices,
        citation_check=_judge(lex, lex_answers),
    )
