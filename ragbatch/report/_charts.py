"""The HTML report's charts, drawn with matplotlib as inline SVG strings (pure: no file I/O).

Figures are built with :class:`matplotlib.figure.Figure` (no pyplot, so no global backend or
figure registry) and written by the SVG backend into memory, text kept as ``<text>`` elements
(``svg.fonttype = "none"``: small files). The SVG ids are salted per chart and the metadata
(date, creator) left out, so the same report gives the same bytes and two charts on one page
never share an id. Needs the ``html`` extra (matplotlib); only :mod:`ragbatch.report._html` imports it.
"""

from __future__ import annotations

import io
import re
from collections.abc import Sequence
from typing import Any

import matplotlib
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.text import Annotation
from matplotlib.ticker import PercentFormatter
from matplotlib.transforms import Bbox

from ragbatch.report._models import Mode, Report

COLORS = {"Jev-only": "#2563eb", "baseline": "#d97706", "cascade": "#059669"}
# Any keys: matplotlib types rc keys as a Literal of every known name.
RC: dict[Any, Any] = {
    "svg.fonttype": "none",
    "font.family": "sans-serif",
    "font.size": 9.0,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.titlesize": 10.0,
    "axes.titleweight": "bold",
}
NO_METADATA = {"Date": None, "Creator": None, "Type": None, "Format": None}
# Every id and every reference to one: matplotlib numbers its groups per figure ("axes_1").
_ID_OR_REF = re.compile(r'(\bid="|url\(#|href="#)')


def svg_text(fig: Figure, name: str) -> str:
    """The figure as an ``<svg>`` element (no XML prolog), its ids prefixed with ``name``."""
    buffer = io.StringIO()
    salted: dict[Any, Any] = {"svg.hashsalt": f"ragbatch-{name}", "svg.fonttype": "none"}
    with matplotlib.rc_context(salted):
        fig.savefig(buffer, format="svg", metadata=NO_METADATA)
    text = buffer.getvalue()
    return _ID_OR_REF.sub(lambda m: f"{m.group(1)}{name}-", text[text.index("<svg") :])


def _figure(width: float, height: float) -> Figure:
    with matplotlib.rc_context(RC):
        return Figure(figsize=(width, height), layout="constrained")


def _style(ax: Axes) -> None:
    ax.grid(True, color="#e5e7eb", linewidth=0.6)
    ax.set_axisbelow(True)


def reliability_svg(modes: Sequence[tuple[str, Mode]]) -> str:
    """One reliability diagram per mode: accuracy per confidence bucket against the diagonal."""
    with matplotlib.rc_context(RC):
        fig = _figure(4.1 * len(modes), 3.7)
        axes = fig.subplots(1, len(modes), squeeze=False)[0]
        for ax, (name, mode) in zip(axes, modes, strict=True):
            _style(ax)
            color = COLORS.get(name, "#4b5563")
            filled = [b for b in mode.calibration.buckets if b.count]
            ax.plot([0, 1], [0, 1], linestyle="--", color="#9ca3af", linewidth=1, label="perfect")
            ax.bar(
                [b.lower for b in filled],
                [b.accuracy for b in filled],
                width=[b.upper - b.lower for b in filled],
                align="edge",
                color=color,
                alpha=0.25,
                edgecolor=color,
                linewidth=0.8,
            )
            total = max(mode.calibration.count, 1)
            ax.scatter(
                [b.mean_confidence for b in filled],
                [b.accuracy for b in filled],
                s=[20 + 200 * b.count / total for b in filled],
                color=color,
                zorder=3,
                label="mean confidence vs accuracy",
            )
            for b in filled:
                ax.annotate(
                    f"n={b.count}",
                    (b.lower + (b.upper - b.lower) / 2, 0.015),
                    ha="center",
                    fontsize=7,
                    color="#374151",
                )
            ax.set(xlim=(0, 1), ylim=(0, 1.02), xlabel="confidence")
            ax.set_title(f"{name} · ECE {mode.calibration.ece:.3f}")
            if ax is axes[0]:
                ax.set_ylabel("accuracy")
                ax.legend(loc="upper left", fontsize=7, frameon=False)
        return svg_text(fig, "reliability")


def risk_coverage_svg(modes: Sequence[tuple[str, Mode]]) -> str:
    """Selective risk against coverage (most confident rows first), one line per mode."""
    with matplotlib.rc_context(RC):
        fig = _figure(8.6, 3.8)
        ax = fig.subplots()
        _style(ax)
        top = 0.0
        for name, mode in modes:
            curve = mode.selective.curve
            if not curve:
                continue
            risks = [p.risk for p in curve]
            top = max(top, *risks)
            ax.plot(
                [0.0] + [p.coverage for p in curve],
                risks[:1] + risks,
                drawstyle="steps-post",
                color=COLORS.get(name, "#4b5563"),
                linewidth=1.6,
                label=f"{name} (AURC {mode.selective.aurc:.3f})",
            )
        ax.set(xlim=(0, 1), ylim=(0, min(1.0, top * 1.15) or 1.0))
        ax.set(xlabel="coverage (share of rows accepted)", ylabel="risk (error rate)")
        ax.set_title("Risk-coverage: accept the most confident rows first")
        if ax.lines:
            ax.legend(loc="upper left", fontsize=8, frameon=False)
        return svg_text(fig, "risk-coverage")


def tradeoff_svg(report: Report) -> str:
    """Accuracy, cost and share of rows sent to the baseline judge, side by side per mode."""
    m = report.modes
    names = ["Jev-only", "baseline", "cascade"]
    modes: list[Mode] = [m.jev_only, m.baseline, m.cascade]
    panels: list[tuple[str, list[float | None], str]] = [
        ("accuracy", [x.classification.accuracy for x in modes], "{:.1%}"),
        ("cost (USD)", [x.cost.usd if x.cost.available else None for x in modes], "{:.3g}"),
        ("rows sent to the baseline", [0.0, 1.0, m.cascade.fallback_rate], "{:.1%}"),
    ]
    with matplotlib.rc_context(RC):
        fig = _figure(12.3, 2.6)
        axes = fig.subplots(1, len(panels), sharey=True)
        for ax, (title, values, fmt) in zip(axes, panels, strict=True):
            _style(ax)
            ax.grid(False, axis="y")
            heights = [v or 0.0 for v in values]
            bars = ax.barh(names, heights, color=[COLORS[n] for n in names], height=0.6)
            labels = ["n/a" if v is None else fmt.format(v) for v in values]
            ax.bar_label(bars, labels=labels, padding=3, fontsize=8)
            ax.set_xlim(0, max(heights) * 1.35 or 1.0)
            ax.set_title(title)
            if fmt.endswith("%}"):
                ax.xaxis.set_major_formatter(PercentFormatter(1.0))
        axes[0].invert_yaxis()  # shared: first mode on top
        return svg_text(fig, "tradeoff")


# Where a point's label may go, in points from the point, nearest first: right or left of it,
# then further up or down, so neighbouring points' labels stack instead of overlapping.
LABEL_OFFSETS: tuple[tuple[float, float], ...] = tuple(
    (dx, dy)
    for dy in (6.0, 16.0, -13.0, 26.0, -23.0, 36.0, -33.0, -43.0, -53.0, -63.0, -73.0, -83.0)
    for dx in (5.0, -5.0)
)
LABEL_PAD = 1.5  # pixels kept free around every label
MARKER_HALF = 4.5  # pixels around a plotted point that a label must not cover


def place_labels(fig: Figure, ax: Axes, labels: Sequence[Annotation]) -> list[Bbox]:
    """Move each label, in order, to the first offset of :data:`LABEL_OFFSETS` where it stays
    inside the axes, clear of the labels already placed, of every plotted point and of the
    legends (of any axes of ``fig``); a moved label gets a thin leader line to its point. Returns the labels'
    final extents (display pixels, padded).

    Deterministic: the layout depends on the data only. If no offset fits, the label keeps
    the last one tried (a dense sweep then overlaps rather than losing a label).
    """
    fig.draw_without_rendering()  # settle the constrained layout: final axes positions
    frame = ax.get_window_extent()
    markers = [
        Bbox.from_extents(x - MARKER_HALF, y - MARKER_HALF, x + MARKER_HALF, y + MARKER_HALF)
        for axes in fig.axes
        for line in axes.get_lines()
        for x, y in line.get_transform().transform(line.get_xydata())
    ]
    markers += [legend.get_window_extent() for a in fig.axes if (legend := a.get_legend())]
    placed: list[Bbox] = []
    for label in labels:
        for dx, dy in LABEL_OFFSETS:
            label.xyann = (dx, dy)
            label.set_horizontalalignment("left" if dx > 0 else "right")
            box = label.get_window_extent().expanded(1.0, 1.0).padded(LABEL_PAD)
            inside = frame.containsx(box.x0) and frame.containsx(box.x1)
            inside = inside and frame.containsy(box.y0) and frame.containsy(box.y1)
            if inside and not any(box.overlaps(other) for other in (*placed, *markers)):
                break
        if (dx, dy) != LABEL_OFFSETS[0]:  # a leader line: an empty annotation's arrow
            line = {"arrowstyle": "-", "color": "#9ca3af", "linewidth": 0.6, "shrinkB": 3}
            ax.annotate("", label.xy, textcoords="offset points", xytext=(dx, dy + 2),
                        arrowprops=line)  # fmt: skip
        placed.append(box)
    return placed


def sweep_figure(report: Report) -> tuple[Figure, list[Annotation]]:
    """The sweep chart's figure and its point labels (placed by :func:`place_labels`)."""
    assert report.tradeoff is not None
    points = report.tradeoff.points
    coverage = [p.jev_only.coverage for p in points]
    with matplotlib.rc_context(RC):
        fig = _figure(7.5, 3.2)
        ax = fig.subplots()
        _style(ax)
        ax.plot(coverage, [p.cascade.accuracy for p in points], "o-", color=COLORS["cascade"],
                label="cascade accuracy")  # fmt: skip
        ax.plot(coverage, [p.jev_only.accuracy for p in points], "s--", color=COLORS["Jev-only"],
                label="Jev-only accuracy")  # fmt: skip
        labels = []
        for i, (p, x) in enumerate(zip(points, coverage, strict=True)):
            mark = " (run)" if p.policy == "run" else ""
            label = ax.annotate(
                f"{p.fail_threshold:g}/{p.pass_threshold:g}{mark}", (x, p.cascade.accuracy),
                textcoords="offset points", xytext=LABEL_OFFSETS[0], fontsize=7,
            )  # fmt: skip
            label.set_gid(f"sweep-label-{i}")
            labels.append(label)
        ax.set(xlim=(0, 1.02), ylim=(0, 1.05), xlabel="share of rows Jev decides automatically")
        ax.xaxis.set_major_formatter(PercentFormatter(1.0))
        ax.yaxis.set_major_formatter(PercentFormatter(1.0))
        ax.set_ylabel("accuracy")
        costs = [p.cascade.cost_usd for p in points]
        known = [c for c in costs if c is not None]
        if len(known) == len(costs):
            twin = ax.twinx()
            twin.plot(coverage, known, "^:", color=COLORS["baseline"], label="cascade cost (USD)")
            twin.set_ylabel("cascade cost (USD)")
            twin.set_ylim(0, max(known) * 1.2 or 1.0)
            twin.legend(loc="lower right", fontsize=8, frameon=False)
        ax.legend(loc="lower left", fontsize=8, frameon=False)
        ax.set_title("Threshold sweep: automatic coverage vs quality and cost")
        place_labels(fig, ax, labels)
        return fig, labels


def sweep_svg(report: Report) -> str:
    """The threshold sweep as a curve: automatic coverage against cascade accuracy and cost;
    each point labelled with its thresholds, labels kept apart (:func:`place_labels`)."""
    with matplotlib.rc_context(RC):
        fig, _ = sweep_figure(report)
        return svg_text(fig, "sweep")


ROUTING_COLORS = {"showcase": "#d97706", "guarded": "#2563eb"}


def routing_curves_svg(report: Report) -> str:
    """Risk against automatic coverage for both routings on the same rows, one line each."""
    assert report.routing_curves is not None
    guarantee = report.policy.guarantee
    with matplotlib.rc_context(RC):
        fig = _figure(8.6, 3.8)
        ax = fig.subplots()
        _style(ax)
        top = 0.0
        for curve in report.routing_curves.curves:
            points = [p for p in curve.points if p.risk is not None]
            risks = [p.risk for p in points if p.risk is not None]
            top = max(top, *risks, 0.0)
            ax.plot([p.coverage for p in points], risks, "o-", linewidth=1.6,
                    color=ROUTING_COLORS.get(curve.routing, "#4b5563"),
                    label=f"{curve.routing} routing")  # fmt: skip
        if guarantee is not None:
            ax.axhline(guarantee.target_risk, color="#dc2626", linestyle="--", linewidth=1.0,
                       label=f"target risk {guarantee.target_risk:.0%}")  # fmt: skip
            top = max(top, guarantee.target_risk)
        ax.set(xlim=(0, 1.02), ylim=(0, min(1.0, top * 1.15) or 1.0))
        ax.xaxis.set_major_formatter(PercentFormatter(1.0))
        ax.yaxis.set_major_formatter(PercentFormatter(1.0))
        ax.set(xlabel="share of rows decided automatically", ylabel="error among automatic rows")
        ax.set_title("Routing: risk-coverage at thresholds (t, 1 - t), same rows")
        if ax.lines:
            ax.legend(loc="upper left", fontsize=8, frameon=False)
        return svg_text(fig, "routing-curves")
