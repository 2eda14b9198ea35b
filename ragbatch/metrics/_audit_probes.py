"""The judge audit: which rows are probed, and what each probe changed (pure: no I/O).

docs/semantics.md §9 defines every number: the sample (stratified by diagnosis and route,
ordered within a stratum by the sha256 of the row id, so the same rows give the same sample
in any order), the verdict reading (confident no / uncertain / confident yes under the run's
thresholds), the flip rate with its Wilson 95 % interval, the mean change of P(true) with a
normal 95 % interval, and the share of rows whose diagnosis changes. Sums are ``math.fsum``
in input order: the section's bytes are the same whatever order the probe calls finished in.
"""

from __future__ import annotations

import hashlib
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from ragbatch.core import (
    JUDGMENTS,
    PROBE_VERSION,
    ClaimSummary,
    Out,
    Probe,
    Row,
    Thresholds,
    diagnose,
    judgment_of,
    read_judgments,
)

AUDIT_VERSION = "1"
DEFAULT_PROBE_RATE = 0.05
MIN_PROBE_ROWS = 200
DEFAULT_MAX_FLIP_RATE = 0.05
Z95 = 1.959963984540054  # the standard normal's 97.5 % quantile
SAMPLE_DESIGN = (
    "stratified by diagnosis/route, proportional allocation (at least one row per stratum), "
    "rows of a stratum taken in order of sha256(id)"
)
INTERVALS = "flip rate: Wilson score 95 %; mean delta: normal 95 % (sample standard deviation)"
# A mean change whose interval clears zero by no more than this is float rounding (1 - p
# computed by a client and added back), not a sign.
SIGN_TOLERANCE = 1e-9
Reading = Literal["no", "uncertain", "yes"]


class ProbeEntry(Out):
    """One probe's effect on one judgment (docs/semantics.md §9)."""

    probe: str
    judgment: str
    rows: int
    questions: int  # answers compared: one a row, one a context for chunkRelevance
    flip_rate: float
    flip_low: float
    flip_high: float
    mean_delta: float  # complement: the mean of p + p' - 1, the judge's lean towards "yes"
    delta_low: float
    delta_high: float
    delta_sign: Literal["positive", "negative", "none"]  # none: the interval holds 0
    diagnosis_change_rate: float
    flagged: bool
    both_flip_rate: float | None = None  # order: verdicts that --context-order both changes


class JudgeAudit(Out):
    """The report's ``judgeAudit`` section: the probes run on a sample of the rows."""

    audit_version: str
    probe_version: str
    design: str
    intervals: str
    probe_rate: float
    min_rows: int
    max_flip_rate: float
    eligible_rows: int
    sampled_rows: int
    skipped: dict[str, int]  # traces (not probed yet), failed rows (no verdict)
    failed_calls: dict[str, int]  # probe -> rows whose probe call failed
    probes: list[ProbeEntry]


@dataclass(frozen=True, slots=True)
class ProbedRow:
    """A row the audit may probe: its original P(true) by question id, and its verdict."""

    row: Row
    base: Mapping[str, float]
    diagnosis: str
    route: str
    claims: ClaimSummary | None = None


def sample_size(eligible: int, rate: float, minimum: int = MIN_PROBE_ROWS) -> int:
    """``rate`` of the rows, at least ``minimum`` (all of them when fewer)."""
    return min(eligible, max(minimum, math.ceil(rate * eligible)))


def probe_sample(
    rows: Sequence[ProbedRow], rate: float, minimum: int = MIN_PROBE_ROWS
) -> list[int]:
    """Indices (ascending) of the rows to probe: :func:`sample_size` of them, stratified by
    (diagnosis, route) with proportional allocation and largest remainders, at least one per
    stratum; within a stratum, rows in order of the sha256 of their id."""
    strata: dict[tuple[str, str], list[int]] = defaultdict(list)
    for i, r in enumerate(rows):
        strata[(r.diagnosis, r.route)].append(i)
    total = sample_size(len(rows), rate, minimum)
    if total == 0:
        return []
    keys = sorted(strata)
    quotas = {k: total * len(strata[k]) / len(rows) for k in keys}
    take = {k: min(len(strata[k]), max(1, math.floor(quotas[k]))) for k in keys}
    by_remainder = sorted(keys, key=lambda k: (-(quotas[k] - math.floor(quotas[k])), k))
    while sum(take.values()) < total:
        grown = False
        for k in by_remainder:
            if sum(take.values()) >= total:
                break
            if take[k] < len(strata[k]):
                take[k] += 1
                grown = True
        if not grown:
            break

    def order(i: int) -> tuple[str, int]:
        return hashlib.sha256(rows[i].row.id.encode()).hexdigest(), i

    return sorted(i for k in keys for i in sorted(strata[k], key=order)[: take[k]])


def reading(p: float, bounds: tuple[float, float]) -> Reading:
    """The thresholded verdict of one probability: confident no, uncertain or confident yes."""
    fail, pass_ = bounds
    return "no" if p <= fail else "yes" if p >= pass_ else "uncertain"


def wilson(k: int, n: int) -> tuple[float, float]:
    """The Wilson score 95 % interval of ``k`` successes in ``n`` trials."""
    z2 = Z95 * Z95
    center = (k + z2 / 2) / (n + z2)
    half = Z95 / (n + z2) * math.sqrt(k * (n - k) / n + z2 / 4)
    # the bounds at 0 and n are exactly 0 and 1 (the formula leaves rounding dust there)
    low = 0.0 if k == 0 else max(0.0, center - half)
    return low, 1.0 if k == n else min(1.0, center + half)


def mean_interval(values: Sequence[float]) -> tuple[float, float, float]:
    """The mean and its normal 95 % interval (sample standard deviation; one value: a point)."""
    n = len(values)
    mean = math.fsum(values) / n
    if n < 2:
        return mean, mean, mean
    sd = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1))
    half = Z95 * sd / math.sqrt(n)
    return mean, mean - half, mean + half


def _diagnosis(r: ProbedRow, answers: Mapping[str, float], t: Thresholds) -> str:
    return diagnose(read_judgments(r.row, answers), t, r.claims).diagnosis


@dataclass
class _Tally:
    rows: int = 0
    flips: int = 0
    both_flips: int = 0
    diagnosis_changes: int = 0

    def __post_init__(self) -> None:
        self.deltas: list[float] = []


def probe_entries(
    probe: Probe,
    rows: Sequence[ProbedRow],
    readings: Sequence[Mapping[str, float] | None],
    thresholds: Thresholds,
    max_flip_rate: float,
) -> list[ProbeEntry]:
    """One entry per judgment the probe asked: ``readings[i]`` is the probe's P(true) of row
    ``i`` by original question id (read as the original question), None if its call failed."""
    tallies: dict[str, _Tally] = {}
    for r, probed in zip(rows, readings, strict=True):
        if probed is None:
            continue
        by_judgment: dict[str, list[str]] = defaultdict(list)
        for qid in probed:
            judgment = judgment_of(qid)
            if judgment is not None and qid in r.base:
                by_judgment[judgment].append(qid)
        for judgment, qids in by_judgment.items():
            tally = tallies.setdefault(judgment, _Tally())
            _tally_row(tally, probe, r, probed, qids, thresholds.bounds[judgment], thresholds)
    entries = []
    for judgment in JUDGMENTS:
        found = tallies.get(judgment)
        if found is not None and found.deltas:
            entries.append(_entry(probe, judgment, found, max_flip_rate))
    return entries


def _tally_row(
    tally: _Tally,
    probe: Probe,
    r: ProbedRow,
    probed: Mapping[str, float],
    qids: list[str],
    bounds: tuple[float, float],
    t: Thresholds,
) -> None:
    tally.rows += 1
    for qid in qids:
        p, q = r.base[qid], probed[qid]
        tally.flips += reading(p, bounds) != reading(q, bounds)
        # complement: q = 1 - p', so p - q = p + p' - 1, the lean towards "yes"
        tally.deltas.append(p - q if probe == "complement" else q - p)
        if probe == "order":
            tally.both_flips += reading(p, bounds) != reading((p + q) / 2, bounds)
    replaced = {**r.base, **{qid: probed[qid] for qid in qids}}
    tally.diagnosis_changes += _diagnosis(r, r.base, t) != _diagnosis(r, replaced, t)


def _entry(probe: Probe, judgment: str, tally: _Tally, max_flip_rate: float) -> ProbeEntry:
    n = len(tally.deltas)
    low, high = wilson(tally.flips, n)
    mean, d_low, d_high = mean_interval(tally.deltas)
    sign: Literal["positive", "negative", "none"] = (
        "positive" if d_low > SIGN_TOLERANCE else "negative" if d_high < -SIGN_TOLERANCE else "none"
    )
    return ProbeEntry(
        probe=probe,
        judgment=judgment,
        rows=tally.rows,
        questions=n,
        flip_rate=tally.flips / n,
        flip_low=low,
        flip_high=high,
        mean_delta=mean,
        delta_low=d_low,
        delta_high=d_high,
        delta_sign=sign,
        diagnosis_change_rate=tally.diagnosis_changes / tally.rows,
        flagged=low > max_flip_rate,
        both_flip_rate=tally.both_flips / n if probe == "order" else None,
    )


def judge_audit(
    *,
    probe_rate: float,
    min_rows: int,
    max_flip_rate: float,
    eligible_rows: int,
    sampled_rows: int,
    skipped: Mapping[str, int],
    failed_calls: Mapping[str, int],
    entries: Sequence[ProbeEntry],
) -> JudgeAudit:
    """The ``judgeAudit`` section from the probes' entries."""
    return JudgeAudit(
        audit_version=AUDIT_VERSION,
        probe_version=PROBE_VERSION,
        design=SAMPLE_DESIGN,
        intervals=INTERVALS,
        probe_rate=probe_rate,
        min_rows=min_rows,
        max_flip_rate=max_flip_rate,
        eligible_rows=eligible_rows,
        sampled_rows=sampled_rows,
        skipped=dict(skipped),
        failed_calls=dict(failed_calls),
        probes=list(entries),
    )
