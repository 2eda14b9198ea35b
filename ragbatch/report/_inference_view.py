"""The ``inference`` section for people: judge rate next to the corrected estimate (pure).

A Markdown table with a text interval bar, and per figure an inline SVG bar for the HTML page
(the corrected interval as a bar, the estimate as a dot, the judge's raw rate as a tick, the
labels-only interval as a thin line), so a judge that overstates a rate is seen at a glance.
"""

from __future__ import annotations

from ragbatch.metrics import Estimate, Inference
from ragbatch.report._tables import Table, pct

BAR = 20  # characters of the Markdown bar for the range [0, 1]
SVG_WIDTH, SVG_HEIGHT = 160, 14


def _where(e: Estimate) -> str:
    return "all rows" if e.slice is None else f"{e.slice['dimension']} = {e.slice['value']}"


def text_bar(e: Estimate) -> str:
    """``[····├──●──┤·····]``: the interval on a 0-1 scale, ``|`` where the judge's rate lies."""
    cells = ["·"] * (BAR + 1)
    low, high = round(e.low * BAR), round(e.high * BAR)
    for i in range(low, high + 1):
        cells[i] = "─"
    cells[low], cells[high] = "├", "┤"
    cells[round(e.estimate * BAR)] = "●"
    judge = round(e.judge_rate * BAR)
    if cells[judge] != "●":  # the estimate wins where both fall in one cell
        cells[judge] = "|"
    return "`" + "".join(cells) + "`"


def inference_table(inference: Inference | None) -> Table | None:
    """Every figure: judge rate, corrected estimate and interval, labels-only, bar."""
    if inference is None:
        return None
    level = f"{inference.confidence:.0%}"
    headers = (
        "Figure", "Mode", "Slice", "Judge rate", "Corrected", f"{level} interval",
        "Labels only", "Labels", "Effective labels", "0 to 1",
    )  # fmt: skip
    rows = tuple(
        (
            e.target,
            e.mode,
            _where(e),
            pct(e.judge_rate),
            pct(e.estimate),
            f"{pct(e.low)} to {pct(e.high)}",
            f"{pct(e.labels_only.low)} to {pct(e.labels_only.high)}",
            str(e.labels),
            f"{e.effective_labels:.0f}",
            text_bar(e),
        )
        for e in inference.estimates
    )
    note = (
        f"{inference.labelled_rows} labelled rows ({inference.sample} sample). "
        f"{inference.method} Bar: ├─┤ the corrected interval, ● the estimate, | the judge's "
        "raw rate."
    )
    if inference.more_labels is not None and inference.target_width is not None:
        note += (
            f" About {inference.more_labels} more labels bring every figure over all rows to "
            f"±{inference.target_width:g}."
        )
    return Table("Corrected rates (human labels)", headers, rows, note)


def interval_svg(e: Estimate) -> str:
    """One figure as a small inline SVG (see the module docstring)."""

    def x(v: float) -> float:
        return round(2 + v * (SVG_WIDTH - 4), 1)

    mid = SVG_HEIGHT / 2
    return (
        f'<svg width="{SVG_WIDTH}" height="{SVG_HEIGHT}" role="img" '
        f'aria-label="judge {pct(e.judge_rate)}, corrected {pct(e.estimate)} '
        f'({pct(e.low)} to {pct(e.high)})">'
        f'<line x1="{x(0)}" x2="{x(1)}" y1="{mid}" y2="{mid}" stroke="#e5e7eb"/>'
        f'<line x1="{x(e.labels_only.low)}" x2="{x(e.labels_only.high)}" y1="{mid + 4}" '
        f'y2="{mid + 4}" stroke="#9ca3af"/>'
        f'<rect x="{x(e.low)}" y="{mid - 3}" width="{max(1.0, x(e.high) - x(e.low))}" '
        f'height="6" fill="#93c5fd"/>'
        f'<circle cx="{x(e.estimate)}" cy="{mid}" r="3" fill="#1d4ed8"/>'
        f'<line x1="{x(e.judge_rate)}" x2="{x(e.judge_rate)}" y1="1" y2="{SVG_HEIGHT - 1}" '
        f'stroke="#dc2626" stroke-width="2"/></svg>'
    )
