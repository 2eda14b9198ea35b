"""A judge-audit section for the view, gate and warning tests: entries written by hand, so each
test knows which are flagged (tests/report/test_audit_views.py, tests/compare, tests/calibrate).
"""

from __future__ import annotations

from typing import Any

from ragbatch.metrics import JudgeAudit, ProbeEntry, judge_audit


def entry(
    probe: str, judgment: str, flips: tuple[float, float, float], flagged: bool
) -> ProbeEntry:
    """One entry: ``flips`` is (rate, low, high); the mean change is +0.04 (0.01 to 0.07)."""
    rate, low, high = flips
    return ProbeEntry(
        probe=probe,
        judgment=judgment,
        rows=200,
        questions=200,
        flip_rate=rate,
        flip_low=low,
        flip_high=high,
        mean_delta=0.04,
        delta_low=0.01,
        delta_high=0.07,
        delta_sign="positive",
        diagnosis_change_rate=0.035,
        flagged=flagged,
    )


def audit() -> JudgeAudit:
    """order/chunkRelevance flagged at 12 % (8 % to 17 %), length/groundedness flagged at 9 %
    (6 % to 13 %), repeat/groundedness at 2 % (1 % to 5 %) not flagged."""
    entries = [
        entry("order", "chunkRelevance", (0.12, 0.08, 0.17), True),
        entry("length", "groundedness", (0.09, 0.06, 0.13), True),
        entry("repeat", "groundedness", (0.02, 0.01, 0.05), False),
    ]
    return judge_audit(
        probe_rate=0.05,
        min_rows=200,
        max_flip_rate=0.05,
        eligible_rows=4000,
        sampled_rows=200,
        skipped={},
        failed_calls={},
        entries=entries,
    )


def audit_json() -> dict[str, Any]:
    """:func:`audit` as the report file holds it."""
    return audit().model_dump(mode="json", by_alias=True)
