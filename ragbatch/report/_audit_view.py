"""The ``judgeAudit`` section for people: each probe's flip rate and its interval (pure).

A summary line for the terminal, the warning ``calibrate`` and ``infer`` print when the audit
flagged a judgment they rely on, a table with a text interval bar for Markdown, and per entry an
inline SVG bar for the HTML page. The bars share one scale (at least 0 to 20 %, wider when a
flip interval reaches further) and mark ``--max-flip-rate``; an entry whose whole interval lies
above it is flagged in every view (docs/guides/judge-audit.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ragbatch.metrics import JudgeAudit, ProbeEntry
from ragbatch.report._tables import Table, pct

TITLE = "Judge audit"
BAR = 20  # characters of the Markdown bar
MIN_SCALE = 0.2  # the bars' scale reaches at least a 20 % flip rate
SVG_WIDTH, SVG_HEIGHT = 160, 14
FLAG = "FLAGGED"


def bar_scale(audit: JudgeAudit) -> float:
    """The flip rate at the bars' right end: 20 %, or the highest bound shown (at most 1)."""
    highest = max((e.flip_high for e in audit.probes), default=0.0)
    return min(1.0, max(MIN_SCALE, audit.max_flip_rate, highest))


def _delta(x: float) -> str:
    shown = round(x, 3) or 0.0  # float noise around 0 (complement's p + p' - 1) shows as +0.000
    return f"{shown:+.3f}"


def text_bar(e: ProbeEntry, scale: float, limit: float) -> str:
    """``[├──●──┤···|······]``: the flip interval and rate, ``|`` at the maximum flip rate."""
    cells = ["·"] * (BAR + 1)

    def cell(v: float) -> int:
        return min(BAR, round(v / scale * BAR))

    low, high = cell(e.flip_low), cell(e.flip_high)
    mark = cell(limit)
    if cells[mark] == "·":
        cells[mark] = "|"
    for i in range(low, high + 1):
        cells[i] = "─"
    cells[low], cells[high] = "├", "┤"
    cells[cell(e.flip_rate)] = "●"
    return "`" + "".join(cells) + "`"


def audit_table(audit: JudgeAudit | None) -> Table | None:
    """One row per probe and judgment: flip rate and interval, mean change, diagnoses, flag."""
    if audit is None:
        return None
    scale = bar_scale(audit)
    headers = (
        "Probe", "Judgment", "Rows", "Flip rate", "95% interval", "Mean Δp", "Δp interval",
        "Diagnosis changed", "Flag", f"flip rate, 0 to {pct(scale)}",
    )  # fmt: skip
    rows = tuple(
        (
            e.probe,
            e.judgment,
            str(e.rows),
            pct(e.flip_rate),
            f"{pct(e.flip_low)} to {pct(e.flip_high)}",
            _delta(e.mean_delta),
            f"{_delta(e.delta_low)} to {_delta(e.delta_high)}",
            pct(e.diagnosis_change_rate),
            FLAG if e.flagged else "",
            text_bar(e, scale, audit.max_flip_rate),
        )
        for e in audit.probes
    )
    note = (
        f"{audit.sampled_rows} of {audit.eligible_rows} rows probed (rate "
        f"{audit.probe_rate:g}, at least {audit.min_rows}). A verdict is the thresholded reading "
        "(confident no, uncertain, confident yes); complement's Δp is the mean of p + p' - 1, the "
        f"judge's lean towards yes. {FLAG}: the whole flip interval lies above the maximum flip "
        f"rate {pct(audit.max_flip_rate)}. Bar: ├─┤ the interval, ● the flip rate, | the maximum."
    )
    return Table(TITLE, headers, rows, note)


def audit_line(audit: JudgeAudit | None) -> str | None:
    """The summary's line: rows probed, and the flagged entries with their flip rates."""
    if audit is None:
        return None
    flagged = [e for e in audit.probes if e.flagged]
    head = f"  judge audit ({audit.sampled_rows} rows probed, {len(audit.probes)} checks): "
    if not flagged:
        worst = max(audit.probes, key=lambda e: e.flip_high, default=None)
        if worst is None:
            return head + "none flagged"
        return (
            f"{head}none flagged, highest flip rate {worst.probe}/{worst.judgment} "
            f"{pct(worst.flip_rate)}"
        )
    shown = ", ".join(
        f"{e.probe}/{e.judgment} {pct(e.flip_rate)} ({pct(e.flip_low)} to {pct(e.flip_high)})"
        for e in flagged[:5]
    )
    more = f" and {len(flagged) - 5} more" if len(flagged) > 5 else ""
    return (
        f"{head}{len(flagged)} {FLAG} over the maximum flip rate "
        f"{pct(audit.max_flip_rate)}: {shown}{more}"
    )


def flip_svg(e: ProbeEntry, scale: float, limit: float) -> str:
    """One entry's flip interval as a small inline SVG: the interval a bar (red when
    flagged), the rate a dot, the maximum flip rate a dashed tick."""

    def x(v: float) -> float:
        return round(2 + min(v / scale, 1.0) * (SVG_WIDTH - 4), 1)

    mid = SVG_HEIGHT / 2
    fill = "#fca5a5" if e.flagged else "#93c5fd"
    dot = "#b91c1c" if e.flagged else "#1d4ed8"
    return (
        f'<svg width="{SVG_WIDTH}" height="{SVG_HEIGHT}" role="img" '
        f'aria-label="{e.probe} {e.judgment}: flip rate {pct(e.flip_rate)} '
        f'({pct(e.flip_low)} to {pct(e.flip_high)}){" flagged" if e.flagged else ""}">'
        f'<line x1="{x(0)}" x2="{x(scale)}" y1="{mid}" y2="{mid}" stroke="#e5e7eb"/>'
        f'<rect x="{x(e.flip_low)}" y="{mid - 3}" '
        f'width="{max(1.0, round(x(e.flip_high) - x(e.flip_low), 1))}" height="6" '
        f'fill="{fill}"/>'
        f'<circle cx="{x(e.flip_rate)}" cy="{mid}" r="3" fill="{dot}"/>'
        f'<line x1="{x(limit)}" x2="{x(limit)}" y1="1" y2="{SVG_HEIGHT - 1}" '
        f'stroke="#111827" stroke-dasharray="2,2"/></svg>'
    )


def audit_warning(
    section: Mapping[str, Any] | None, relied: Iterable[str], what: str
) -> str | None:
    """A warning naming the judgments ``what`` relies on that the report's judge audit (its
    ``judgeAudit`` JSON, None if it has none) flagged, with the probes that flagged them."""
    if not section:
        return None
    wanted = set(relied)
    probes: dict[str, list[str]] = {}
    for e in section.get("probes", []):
        if e.get("flagged") and e.get("judgment") in wanted:
            probes.setdefault(e["judgment"], []).append(e["probe"])
    if not probes:
        return None
    named = ", ".join(f"{j} ({', '.join(p)})" for j, p in probes.items())
    return (
        f"the judge audit flagged {named}: {what} relies on "
        f"{'it' if len(probes) == 1 else 'them'}, and its figures assume a judge that these "
        "probes do not move (see docs/guides/judge-audit.md)"
    )
