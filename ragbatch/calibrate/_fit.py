"""Fit fail/pass thresholds to a labelled report under a risk target (pure: no I/O).

``calibrate`` picks the thresholds — one global pair, then per judgment where a judgment has
enough rows — that automate the most rows (route ``auto``) while the one-sided
Clopper-Pearson upper bound of the diagnosis error among those rows stays at or below the
target. k-fold cross-validation with a fixed seed gives the held-out risk next to the
in-sample one. When the data cannot support the target it refuses with a
:class:`~ragbatch.core._errors.ConfigError` saying why and what to do. The result is a
:class:`PolicyFile`, versioned by the sha256 of its own canonical JSON.

Bounds are computed in pure Python (:mod:`ragbatch.calibrate._bounds`): scipy is not a
runtime dependency. The search lives in :mod:`ragbatch.calibrate._search`, the precedence
table over per-judgment thresholds in :mod:`ragbatch.calibrate._rules`.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from ragbatch.calibrate._advice import refusal
from ragbatch.calibrate._bounds import auroc, upper_bound
from ragbatch.calibrate._guarantee import Candidate, Certification, assumption, certify
from ragbatch.calibrate._labelled import labelled, labelled_answers
from ragbatch.calibrate._ladder import count_one
from ragbatch.calibrate._policy_file import (
    FORMAT_VERSION,
    Fit,
    FittedOn,
    HeldOut,
    JudgmentFit,
    PolicyFile,
    ThresholdPair,
    TieBlock,
    load_policy,
    policy_bytes,
    thresholds_of,
    with_version,
)
from ragbatch.calibrate._row_view import DatasetView, report_view
from ragbatch.calibrate._rules import (
    BAND,
    HIGH,
    JUDGMENTS,
    Pair,
    implied_labels,
    rediagnose,
    status,
    tie_blocks,
    tie_sentence,
    uniform,
)
from ragbatch.calibrate._search import Sample
from ragbatch.core import DIAGNOSES, ROUTINGS, ConfigError, DiagnosisRisk, Guarantee
from ragbatch.metrics import safe

__all__ = [
    "JUDGMENTS",
    "MIN_AUROC",
    "MIN_LABELLED",
    "Fit",
    "FittedOn",
    "HeldOut",
    "JudgmentFit",
    "PolicyFile",
    "ThresholdPair",
    "calibrate",
    "calibrate_report",
    "load_policy",
    "policy_bytes",
    "rediagnose",
    "thresholds_of",
    "uniform",
]

MIN_LABELLED = 30
MIN_AUROC = 0.6


def calibrate(
    rows: Sequence[Mapping[str, Any]],
    target_risk: float,
    confidence: float,
    folds: int = 5,
    seed: int = 0,
    grid: Sequence[float] | None = None,
    *,
    routing: str = "auto",
    dataset: Any = None,
    report_version: str | None = None,
    per_diagnosis: Mapping[str, float] | None = None,
) -> PolicyFile:
    """Fit a policy to report rows; only ``status == "ok"`` rows with ``expected`` count.

    ``routing`` is ``showcase``, ``guarded`` or ``auto`` (both, alpha shared between them). The
    guarantee is fixed-sequence testing of ladders fixed in advance on every labelled row
    (:mod:`ragbatch.calibrate._guarantee`). ``per_diagnosis`` maps automatic diagnoses to
    their own targets, certified jointly with the pooled one. ``dataset`` is the report's
    ``dataset`` block (name, sha256) and ``report_version`` its ``reportVersion``; both are
    recorded in ``fittedOn``. ``grid``, when given, replaces the ladder's t values.
    """
    _check_options(target_risk, confidence, folds, grid, routing, per_diagnosis)
    used = labelled(rows)
    samples = [Sample(r.signals, r.expected, r.trace) for r in used]
    if len(samples) < MIN_LABELLED:
        raise ConfigError(
            f"only {len(samples)} labelled successful rows or traces; calibration "
            f"needs at least {MIN_LABELLED} — add `expected` labels to more dataset rows and "
            "rerun"
        )
    if folds > len(samples):
        raise ConfigError(f"--folds {folds} exceeds the {len(samples)} labelled rows")
    answers = (a for x in samples for a in labelled_answers(x.signals, x.expected, x.trace))
    blocks = tie_blocks(answers, target_risk)
    tie = tie_sentence(blocks)
    area = auroc([r.confidence for r in used], [r.diagnosis == r.expected for r in used])
    routings = ROUTINGS if routing == "auto" else (routing,)
    cert = certify(samples, target_risk, confidence, routings, seed, grid, per_diagnosis)
    chosen = cert.chosen
    # The ranking check explains a refusal; it does not overrule a certificate, whose
    # validity rests on the test alone (a pre-check on labels only ever cost power).
    if chosen is None and area is not None and area < MIN_AUROC:
        raise ConfigError(
            f"the judge's row confidence barely ranks right above wrong verdicts (AUROC "
            f"{area:.3f} < {MIN_AUROC}), so no threshold can buy coverage at a bounded "
            f"risk{tie}; improve the judge or its questions before calibrating"
        )
    if chosen is None:
        raise ConfigError(
            refusal(samples, target_risk, confidence, routings, grid, per_diagnosis, tie)
        )
    fitted = chosen.fitted
    traces = any(s.trace is not None for s in samples)
    held_out = _cross_validate(
        samples, chosen, target_risk, confidence, folds, seed, grid, per_diagnosis
    )
    return with_version(
        format_version=FORMAT_VERSION,
        routing=chosen.routing,
        fail_threshold=fitted.fail,
        pass_threshold=fitted.pass_,
        per_judgment={
            name: ThresholdPair(
                fail_threshold=fitted.thresholds[name][0],
                pass_threshold=fitted.thresholds[name][1],
            )
            for name in fitted.refined
        },
        target_risk=target_risk,
        confidence=confidence,
        fitted_on=_fitted_on(rows, used, samples, dataset, report_version),
        in_sample=_fit(chosen.rows, chosen.count.auto, chosen.count.errors, confidence),
        held_out=held_out,
        judgments=_judgment_fits(samples, fitted.thresholds, confidence),
        guarantee=_guarantee(cert, chosen, target_risk, confidence, per_diagnosis, traces),
        tie_blocks=[
            TieBlock(judgment=name, value=value, rows=n, errors=k, error_rate=k / n)
            for name, value, n, k in blocks
        ]
        or None,
    )


def _guarantee(
    cert: Certification,
    chosen: Candidate,
    target: float,
    confidence: float,
    per_diagnosis: Mapping[str, float] | None,
    traces: bool,
) -> Guarantee:
    """The certificate: the target as the bound, the observed figures as estimates."""
    c, own = chosen.count, per_diagnosis or {}
    risks = [
        DiagnosisRisk(
            diagnosis=d,
            auto_rows=a,
            errors=k,
            estimated_risk=k / a,
            target=own.get(d),
            above_target=k / a > own.get(d, target),
        )
        for d, (a, k) in sorted(c.by_diagnosis.items(), key=lambda item: DIAGNOSES.index(item[0]))
    ]
    return Guarantee(
        target_risk=target,
        confidence=confidence,
        method=chosen.method,
        routing=chosen.routing,
        certified_on=chosen.rows,
        auto_rows=c.auto,
        errors=c.errors,
        estimated_coverage=safe(c.auto, chosen.rows),
        coverage_lower_bound=1.0 - upper_bound(chosen.rows - c.auto, chosen.rows, confidence),
        estimated_risk=safe(c.errors, c.auto),
        candidates_tested=len(cert.tested),
        per_diagnosis=risks,
        assumption=assumption(bool(per_diagnosis), traces),
    )


def calibrate_report(
    report: Mapping[str, Any],
    target_risk: float,
    confidence: float,
    folds: int = 5,
    seed: int = 0,
    grid: Sequence[float] | None = None,
    routing: str = "auto",
    per_diagnosis: Mapping[str, float] | None = None,
) -> PolicyFile:
    """:func:`calibrate` on a parsed report (its rows, dataset block and version)."""
    view = report_view(report)
    return calibrate(
        view.rows,
        target_risk,
        confidence,
        folds,
        seed,
        grid,
        routing=routing,
        dataset=view.dataset,
        report_version=view.report_version,
        per_diagnosis=per_diagnosis,
    )


def _check_options(
    target_risk: float,
    confidence: float,
    folds: int,
    grid: Sequence[float] | None,
    routing: str = "auto",
    per_diagnosis: Mapping[str, float] | None = None,
) -> None:
    if routing not in ("auto", *ROUTINGS):
        raise ConfigError(f"--routing must be auto, showcase or guarded, got {routing!r}")
    if not 0.0 < target_risk < 1.0:
        raise ConfigError(f"--target-risk must lie strictly between 0 and 1, got {target_risk}")
    if not 0.0 < confidence < 1.0:
        raise ConfigError(f"--confidence must lie strictly between 0 and 1, got {confidence}")
    if folds < 2:
        raise ConfigError(f"--folds must be at least 2, got {folds}")
    if grid is not None and any(not 0.0 <= g <= 1.0 for g in grid):
        raise ConfigError("every grid threshold must lie in [0, 1]")
    for name, own in (per_diagnosis or {}).items():
        if name not in DIAGNOSES or name == "JUDGE_UNCERTAIN":
            raise ConfigError(
                f"--per-diagnosis: {name!r} is not an automatic diagnosis; use one of "
                f"{', '.join(d for d in DIAGNOSES if d != 'JUDGE_UNCERTAIN')}"
            )
        if not 0.0 < own < 1.0:
            raise ConfigError(f"--per-diagnosis: {name}'s target must lie in (0, 1), got {own}")


def _fit(rows: int, auto: int, errors: int, confidence: float) -> Fit:
    return Fit(
        coverage=safe(auto, rows),
        risk=safe(errors, auto),
        risk_upper_bound=upper_bound(errors, auto, confidence),
        auto_rows=auto,
        errors=errors,
        rows=rows,
    )


def _cross_validate(
    samples: Sequence[Sample],
    chosen: Candidate,
    target: float,
    confidence: float,
    folds: int,
    seed: int,
    grid: Sequence[float] | None,
    per_diagnosis: Mapping[str, float] | None,
) -> HeldOut:
    """k-fold CV of the whole procedure in the chosen routing: certify on k - 1 folds, count
    the result on the held-out fold, pool the counts.

    A fold whose training part certifies nothing automates nothing on its held-out part
    (what ``calibrate`` would do there: refuse, so every row goes to the fallback judge).
    """
    order = list(range(len(samples)))
    random.Random(seed).shuffle(order)
    auto = errors = 0
    for f in range(folds):
        held = set(order[f::folds])
        train = [s for i, s in enumerate(samples) if i not in held]
        cert = certify(train, target, confidence, (chosen.routing,), seed, grid, per_diagnosis)
        if cert.chosen is not None:
            held_rows = [samples[i] for i in sorted(held)]
            c = count_one(held_rows, cert.chosen.fitted.thresholds, chosen.routing)
            auto, errors = auto + c.auto, errors + c.errors
    pooled = _fit(len(samples), auto, errors, confidence)
    meets = pooled.risk_upper_bound <= target
    note = None
    if not meets:
        note = (
            f"cross-validation refits on {folds - 1} of {folds} folds and bounds the pooled "
            "held-out errors of those refits; it checks the procedure, not this policy, and "
            "its bound exceeding the target does not contradict the certificate (the "
            "guarantee is the target, at the confidence, under its assumption)"
        )
    return HeldOut(**pooled.model_dump(), folds=folds, seed=seed, meets_target=meets, note=note)


def _judgment_fits(
    samples: Sequence[Sample], thresholds: Mapping[str, Pair], confidence: float
) -> dict[str, JudgmentFit]:
    """Each judgment's own automatic decisions against the labels its row's diagnosis implies.

    Reports carry the expected diagnosis, not per-judgment labels; a diagnosis implies the
    judgments of every rule before it (good) and of its own rule (bad); a trace's answers are
    labelled by their step's own diagnosis, when it has one. A judgment is decided
    automatically when its answer is low (a "no") or high (a "yes").
    """
    out: dict[str, JudgmentFit] = {}
    answers = [a for s in samples for a in labelled_answers(s.signals, s.expected, s.trace)]
    for j, name in enumerate(JUDGMENTS):
        pairs = [
            (p, label)
            for i, p, expected, _ in answers
            if i == j and (label := implied_labels(expected).get(name)) is not None
        ]
        decided = [(status(p, thresholds[name]), label) for p, label in pairs]
        auto = [(st, label) for st, label in decided if st != BAND]
        wrong = sum((st == HIGH) != label for st, label in auto)  # high is a "yes"
        out[name] = JudgmentFit(
            labelled_rows=len(pairs),
            coverage=safe(len(auto), len(pairs)),
            risk=safe(wrong, len(auto)),
            risk_upper_bound=upper_bound(wrong, len(auto), confidence),
            auroc=auroc([p for p, _ in pairs], [label for _, label in pairs]),
        )
    return out


def _fitted_on(
    rows: Sequence[Mapping[str, Any]],
    used: Sequence[Any],
    samples: Sequence[Sample],
    dataset: Any,
    report_version: str | None,
) -> FittedOn:
    """What the policy was fitted on, with a hash of exactly the numbers the search saw."""
    seen = [
        [r.id, s.expected, list(s.signals)] + ([] if s.trace is None else [s.trace.layout()])
        for r, s in zip(used, samples, strict=True)
    ]
    digest = hashlib.sha256(orjson.dumps(seen)).hexdigest()
    if isinstance(dataset, Mapping):  # a caller's own dataset block
        dataset = DatasetView.model_validate(dataset)
    traces = sum(s.trace is not None for s in samples)
    return FittedOn(
        dataset_sha256=dataset.sha256 if dataset else None,
        dataset_name=dataset.name if dataset else None,
        rows=len(rows),
        labelled_rows=len(samples),
        report_version=report_version,
        rows_sha256=digest,
        labelled_traces=traces or None,
    )
