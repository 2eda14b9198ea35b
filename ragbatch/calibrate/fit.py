"""Fit fail/pass thresholds to a labelled report under a risk target (pure: no I/O).

``calibrate`` picks the thresholds — one global pair, then per judgment where a judgment has
enough rows — that automate the most rows (route ``auto``) while the one-sided
Clopper-Pearson upper bound of the diagnosis error among those rows stays at or below the
target. k-fold cross-validation with a fixed seed gives the held-out risk next to the
in-sample one. When the data cannot support the target it refuses with a
:class:`~ragbatch.core.errors.ConfigError` saying why and what to do. The result is a
:class:`PolicyFile`, versioned by the sha256 of its own canonical JSON.

Bounds are computed in pure Python (:mod:`ragbatch.calibrate.bounds`): scipy is not a
runtime dependency. The search lives in :mod:`ragbatch.calibrate.search`, the precedence
table over per-judgment thresholds in :mod:`ragbatch.calibrate.rules`.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from ragbatch.calibrate.bounds import auroc, best_bound, max_errors, upper_bound
from ragbatch.calibrate.guarantee import (
    ASSUMPTION,
    METHOD,
    Candidate,
    Certification,
    best_symmetric,
    certify,
)
from ragbatch.calibrate.policy_file import (
    Fit,
    FittedOn,
    HeldOut,
    JudgmentFit,
    PolicyFile,
    ThresholdPair,
    load_policy,
    policy_bytes,
    thresholds_of,
    with_version,
)
from ragbatch.calibrate.rules import (
    BAND,
    DECIDE,
    HIGH,
    JUDGMENTS,
    Pair,
    implied_labels,
    rediagnose,
    signals_of,
    status,
    tie_block,
    uniform,
)
from ragbatch.calibrate.search import Sample, count, fit
from ragbatch.core.errors import ConfigError
from ragbatch.core.policy import ROUTINGS, Guarantee
from ragbatch.metrics.scores import safe

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
    dataset: Mapping[str, Any] | None = None,
    report_version: str | None = None,
) -> PolicyFile:
    """Fit a policy to report rows; only ``status == "ok"`` rows with ``expected`` count.

    ``routing`` is ``showcase``, ``guarded`` or ``auto`` (both are searched and the one that
    certifies more held-out coverage is kept). The guarantee is Learn-then-Test on a seeded
    half of the rows the search never saw (:mod:`ragbatch.calibrate.guarantee`).
    ``dataset`` is the report's ``dataset`` block (name, sha256) and ``report_version`` its
    ``reportVersion``; both are recorded in ``fittedOn``. ``grid``, when given, replaces the
    candidate thresholds (the extremes 0 and 1 are always added).
    """
    _check_options(target_risk, confidence, folds, grid, routing)
    used = [r for r in rows if r.get("status") == "ok" and r.get("expected") is not None]
    for r in used:
        if r.get("claimSummary") is not None:
            raise ConfigError(
                f"row {r.get('id')}: claim-mode rows cannot be calibrated yet (their "
                "groundedness comes from claim verdicts); calibrate a basic-mode report"
            )
    samples = [Sample(signals_of(r), str(r["expected"])) for r in used]
    if len(samples) < MIN_LABELLED:
        raise ConfigError(
            f"only {len(samples)} labelled successful rows; calibration needs at least "
            f"{MIN_LABELLED} — add `expected` labels to more dataset rows and rerun"
        )
    if folds > len(samples):
        raise ConfigError(f"--folds {folds} exceeds the {len(samples)} labelled rows")
    tie = tie_block([(x.signals, x.expected) for x in samples], target_risk)
    area = auroc(
        [float(r.get("confidence") or 0.0) for r in used],
        [r.get("diagnosis") == r["expected"] for r in used],
    )
    if area is not None and area < MIN_AUROC:
        raise ConfigError(
            f"the judge's row confidence barely ranks right above wrong verdicts (AUROC "
            f"{area:.3f} < {MIN_AUROC}), so no threshold can buy coverage at a bounded "
            f"risk{tie}; improve the judge or its questions before calibrating"
        )
    routings = ROUTINGS if routing == "auto" else (routing,)
    cert = certify(samples, target_risk, confidence, routings, seed, grid)
    chosen = cert.chosen
    if chosen is None:
        raise ConfigError(_refusal(cert, target_risk, confidence, tie))
    fitted = chosen.fitted
    guarantee = Guarantee(
        target_risk=target_risk,
        confidence=confidence,
        method=METHOD,
        routing=chosen.routing,
        coverage=safe(chosen.certify_auto, cert.certify_rows),
        risk_upper_bound=upper_bound(chosen.certify_errors, chosen.certify_auto, confidence),
        certified_on=cert.certify_rows,
        auto_rows=chosen.certify_auto,
        errors=chosen.certify_errors,
        candidates_tested=len(cert.tested),
        assumption=ASSUMPTION,
    )
    return with_version(
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
        in_sample=_fit(cert.fit_rows, chosen.fit_auto, chosen.fit_errors, confidence),
        held_out=_cross_validate(samples, chosen, target_risk, confidence, folds, seed, grid),
        judgments=_judgment_fits(samples, fitted.thresholds, confidence),
        guarantee=guarantee,
    )


def _refusal(cert: Certification, target: float, confidence: float, tie: str) -> str:
    """Why nothing was certified, with the best that was achievable and what to do."""
    what = (
        f"no thresholds meet target risk {target} at confidence {confidence}"
        f" ({cert.fit_rows} rows to fit, {cert.certify_rows} held out to certify)"
    )
    advice = "; label more rows, relax --target-risk, or improve the judge"
    bound, n, k = best_bound(cert.best_fit_min_errors, confidence)
    best = (
        f"on the fit rows the best achievable upper bound is {bound:.4f} ({k} wrong of {n} "
        f"automatic rows, coverage {safe(n, cert.fit_rows):.3f})"
    )
    if not cert.tested:
        return f"{what}: {best}{tie}{advice}"
    first = cert.tested[0]
    held = upper_bound(first.certify_errors, first.certify_auto, confidence)
    return (
        f"{what}: {best}; the first candidate tested ({first.routing} routing) had "
        f"{first.certify_errors} wrong of {first.certify_auto} automatic held-out rows, upper "
        f"bound {held:.4f}{tie}{advice}"
    )


def calibrate_report(
    report: Mapping[str, Any],
    target_risk: float,
    confidence: float,
    folds: int = 5,
    seed: int = 0,
    grid: Sequence[float] | None = None,
    routing: str = "auto",
) -> PolicyFile:
    """:func:`calibrate` on a parsed report (its rows, dataset block and version)."""
    return calibrate(
        report.get("rows") or [],
        target_risk,
        confidence,
        folds,
        seed,
        grid,
        routing=routing,
        dataset=report.get("dataset"),
        report_version=report.get("reportVersion"),
    )


def _check_options(
    target_risk: float,
    confidence: float,
    folds: int,
    grid: Sequence[float] | None,
    routing: str = "auto",
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
) -> HeldOut:
    """k-fold CV of the chosen candidate's family: fit on k - 1 folds, count on the held-out
    fold, pool the counts.

    The family is the chosen routing with a symmetric pair (the best one of the training
    part) or, when the chosen policy has per-judgment thresholds, the search's fit. A fold
    whose training part admits no thresholds automates nothing on its held-out part (what
    ``calibrate`` would do there: refuse, so every row goes to the fallback judge).
    """
    order = list(range(len(samples)))
    random.Random(seed).shuffle(order)
    rule = DECIDE[chosen.routing]
    auto = errors = 0
    for f in range(folds):
        held = set(order[f::folds])
        train = [s for i, s in enumerate(samples) if i not in held]
        if chosen.fitted.refined:
            kmax = max_errors(len(train), target, confidence)
            fitted, _ = fit(train, kmax, grid, chosen.routing)
        else:
            fitted = best_symmetric(train, target, confidence, chosen.routing, grid)
        if fitted is not None:
            a, e = count([samples[i] for i in sorted(held)], fitted.thresholds, rule)
            auto, errors = auto + a, errors + e
    pooled = _fit(len(samples), auto, errors, confidence)
    return HeldOut(
        **pooled.model_dump(),
        folds=folds,
        seed=seed,
        meets_target=pooled.risk_upper_bound <= target,
    )


def _judgment_fits(
    samples: Sequence[Sample], thresholds: Mapping[str, Pair], confidence: float
) -> dict[str, JudgmentFit]:
    """Each judgment's own automatic decisions against the labels its row's diagnosis implies.

    Reports carry the expected diagnosis, not per-judgment labels; a diagnosis implies the
    judgments of every rule before it (good) and of its own rule (bad). A judgment is decided
    automatically when its answer is low (a "no") or high (a "yes").
    """
    out: dict[str, JudgmentFit] = {}
    for j, name in enumerate(JUDGMENTS):
        pairs = [
            (p, label)
            for s in samples
            if (p := s.signals[j]) is not None
            and (label := implied_labels(s.expected).get(name)) is not None
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
    used: Sequence[Mapping[str, Any]],
    samples: Sequence[Sample],
    dataset: Mapping[str, Any] | None,
    report_version: str | None,
) -> FittedOn:
    """What the policy was fitted on, with a hash of exactly the numbers the search saw."""
    seen = [[r.get("id"), s.expected, list(s.signals)] for r, s in zip(used, samples, strict=True)]
    digest = hashlib.sha256(orjson.dumps(seen)).hexdigest()
    info = dataset or {}
    return FittedOn(
        dataset_sha256=info.get("sha256"),
        dataset_name=info.get("name"),
        rows=len(rows),
        labelled_rows=len(samples),
        report_version=report_version,
        rows_sha256=digest,
    )
