"""What ``ragbatch calibrate`` prints, and its option parsing (pure: text in, text out).

The sentence states only what is guaranteed: the target, at the confidence, under the
assumption. Observed figures are labelled as estimates; the per-diagnosis estimates are
always shown next to the pooled one, a diagnosis above the target flagged; tie blocks are
named whether or not the calibration refused.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ragbatch.calibrate._fit import calibrate_report
from ragbatch.calibrate._policy_file import PolicyFile
from ragbatch.core import DIAGNOSES, ConfigError

AUTOMATIC = tuple(d for d in DIAGNOSES if d != "JUDGE_UNCERTAIN")


def per_diagnosis_targets(text: str | None, target: float) -> dict[str, float] | None:
    """``--per-diagnosis``: ``all`` (every automatic diagnosis at the target) or
    ``PASS=0.05,RETRIEVAL_MISS=0.02`` (the listed ones at their own targets)."""
    if text is None:
        return None
    if text.strip() == "all":
        return dict.fromkeys(AUTOMATIC, target)
    out: dict[str, float] = {}
    for part in text.split(","):
        name, sep, value = part.strip().partition("=")
        try:
            out[name.strip()] = float(value) if sep else target
        except ValueError:
            raise ConfigError(
                f"--per-diagnosis: {part.strip()!r} is not DIAGNOSIS=RISK (e.g. PASS=0.05)"
            ) from None
    return out


def calibrate_targets(
    report: Mapping[str, Any],
    targets: Sequence[float],
    confidence: float,
    folds: int,
    seed: int,
    routing: str,
    per_diagnosis: str | None,
) -> tuple[PolicyFile, list[str]]:
    """The policy for the first target, and a table of what every target certifies.

    Each row of the table is its own certificate on the same labels, not a joint one; only
    the first target's policy is written.
    """
    table: list[str] = []
    first: PolicyFile | None = None
    for i, target in enumerate(targets):
        own = per_diagnosis_targets(per_diagnosis, target)
        try:
            policy = calibrate_report(report, target, confidence, folds, seed, None, routing, own)
        except ConfigError as error:
            if i == 0:
                raise
            table.append(f"  {target:>7.1%}  refused: {str(error).split('. ')[-1][:90]}")
            continue
        first = first or policy
        g = policy.guarantee
        assert g is not None  # calibrate always certifies what it writes
        table.append(
            f"  {target:>7.1%}  coverage {g.estimated_coverage:.1%} (estimate; >= "
            f"{g.coverage_lower_bound:.1%} at {confidence:.0%}), {g.routing}, fail "
            f"{policy.fail_threshold:g} / pass {policy.pass_threshold:g}"
        )
    assert first is not None
    return first, (
        ["  target   certified (each its own certificate)", *table] if len(targets) > 1 else []
    )


def summary(policy: PolicyFile, out: str, table: Sequence[str]) -> str:
    """The lines ``ragbatch calibrate`` prints after writing ``policy`` to ``out``."""
    g, held = policy.guarantee, policy.held_out
    assert g is not None
    lines = [
        f"policy {policy.version[:19]}… -> {out}: {policy.routing} routing, fail "
        f"{policy.fail_threshold}, pass {policy.pass_threshold}, "
        f"{len(policy.per_judgment)} per-judgment overrides",
        f"  guarantee: with {g.confidence:.0%} confidence the diagnosis error of the rows Jev "
        f"decides automatically is at most {g.target_risk:.1%}"
        + (" (and per listed diagnosis at most its own target)" if _own(policy) else "")
        + f"; assumes {g.assumption} ({g.method})",
        f"  estimates on the {g.certified_on:,} labelled rows tested{_of_them(policy)}: "
        "coverage "
        f"{g.estimated_coverage:.1%} (at least {g.coverage_lower_bound:.1%} at "
        f"{g.confidence:.0%}), risk {g.estimated_risk:.2%} ({g.errors} wrong of "
        f"{g.auto_rows}); {g.candidates_tested} candidates tested",
        "  per diagnosis (estimates): "
        + ", ".join(
            f"{d.diagnosis} {d.estimated_risk:.1%} of {d.auto_rows}"
            + (" ABOVE TARGET" if d.above_target else "")
            for d in g.per_diagnosis
        ),
    ]
    flagged = [d.diagnosis for d in g.per_diagnosis if d.above_target]
    if flagged:
        lines.append(
            f"  warning: {', '.join(flagged)} automatic rows were wrong more often than the "
            "target on the labelled rows; the pooled guarantee does not bound them one by "
            "one (use --per-diagnosis to certify them separately)"
        )
    for block in policy.tie_blocks or []:
        lines.append(
            f"  warning: tie block: {block.rows} labelled rows answer {block.judgment} = "
            f"{block.value:g} exactly (no threshold can separate them); "
            f"{block.error_rate:.0%} of them disagree with their labels"
        )
    lines.append(
        f"  cross-validated ({held.folds} folds, an estimate): coverage {held.coverage:.1%}, "
        f"risk {held.risk:.2%}" + (f"; {held.note}" if held.note else "")
    )
    return "\n".join([*lines, *table])


def _of_them(policy: PolicyFile) -> str:
    on, traces = policy.fitted_on, policy.fitted_on.labelled_traces
    if not traces:
        return ""
    g = policy.guarantee
    if g is not None and g.certified_on == on.labelled_rows:
        return f" ({traces:,} of them multi-step traces)"
    return f" (of the {on.labelled_rows:,} labelled, {traces:,} are multi-step traces)"


def _own(policy: PolicyFile) -> bool:
    g = policy.guarantee
    return g is not None and any(d.target is not None for d in g.per_diagnosis)
