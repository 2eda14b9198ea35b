"""Distribution drift between two reports: PSI, two-sample KS and an abstention z-test (pure).

Drift detection (docs/semantics.md §6): distribution shifts in queries, scores and abstention.
:func:`distribution_drift` compares per-row distributions of report ``a`` (baseline) and ``b``
(new run): ``queryTokens`` (when rows carry it), ``contextCount`` (``len(chunkRelevance)``) and
every judgment probability, ``retrieval.bestChunk`` being the highest chunk relevance. Rows
lacking a value are left out of it; a quantity absent from either report is skipped with a note.

Flag statistic: the **population stability index** PSI = Σ_i (b_i - a_i) · ln(b_i / a_i), a_i
and b_i the shares of each sample in bin i, an empty bin's share replaced by ``EPSILON = 1e-4``
(no renormalisation). Probabilities use 10 fixed bins [0, 0.1), ..., [0.9, 1.0]; unbounded
quantities use the baseline's nearest-rank deciles ``sorted(a)[ceil(j·n/10) - 1]`` (j = 1..9,
deduplicated) as cut points of right-closed bins (-inf, e_1], ..., (e_k, inf). Thresholds (the
credit-scoring rule of thumb): PSI < 0.1 none, 0.1 <= PSI < 0.25 moderate, PSI >= 0.25 drift.

Reported beside it: the two-sample **Kolmogorov-Smirnov** D = sup_x |F_a(x) - F_b(x)| and its
asymptotic p-value Q_KS(sqrt(n·m/(n+m)) · D), Q_KS the Kolmogorov survival function (scipy's
``kstwobign.sf``); approximate for a few dozen rows (``ks_2samp`` uses the finite-n ``kstwo``).

**Abstention rate**: share of rows with ``generation.abstention >= 0.5``, compared by a pooled
two-proportion z-test, z = (p_b - p_a) / sqrt(p(1-p)(1/n_a + 1/n_b)), two-sided p-value
``erfc(|z| / sqrt 2)``: moderate when p < 0.05, drift when p < 0.01. Differing model-release and
pricing fields (``ragbatch.compare._diff.CHANGE_PATHS``) are listed too. No result depends on row order.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from ragbatch.compare._diff import (
    Change,
    ReportData,
    as_json,
    as_number,
    fmt,
    get_path,
    markdown_table,
    report_rows,
    setup_changes,
)
from ragbatch.metrics import Out

EPSILON = 1e-4
PROBABILITY_EDGES: tuple[float, ...] = tuple(i / 10 for i in range(1, 10))
Flag = Literal["none", "moderate", "drift"]
RowMap = Mapping[str, Any]


class Thresholds(Out):
    """The cut-offs used for the flags (PSI for quantities, p-values for the abstention rate)."""

    psi_moderate: float = 0.1
    psi_drift: float = 0.25
    alpha_moderate: float = 0.05
    alpha_drift: float = 0.01
    abstention_threshold: float = 0.5


class Quantity(Out):
    """One per-row quantity compared between the reports; ``flag`` comes from ``psi``."""

    name: str
    binning: Literal["fixed", "quantile"]
    n_a: int
    n_b: int
    psi: float
    ks: float
    ks_p_value: float
    flag: Flag


class AbstentionRate(Out):
    """Share of rows judged to abstain in each report, compared by a two-proportion z-test."""

    n_a: int
    n_b: int
    a: float
    b: float
    z: float
    p_value: float
    flag: Flag


class DriftReport(Out):
    """Everything :func:`distribution_drift` found; ``notes`` says what was skipped and why."""

    metric: Literal["psi"] = "psi"
    thresholds: Thresholds
    quantities: list[Quantity]
    abstention_rate: AbstentionRate | None
    model_changes: list[Change]
    pricing_changes: list[Change]
    notes: list[str]


# -- statistics ----------------------------------------------------------------------------


def bin_counts(values: Sequence[float], edges: Sequence[float], right_closed: bool) -> list[int]:
    """Counts per bin cut at ``edges``: [e_i, e_i+1) bins, or (e_i, e_i+1] when right-closed."""
    find = bisect_left if right_closed else bisect_right
    counts = [0] * (len(edges) + 1)
    for value in values:
        counts[find(edges, value)] += 1
    return counts


def quantile_edges(baseline: Sequence[float], bins: int = 10) -> list[float]:
    """Deduplicated nearest-rank quantile cut points of ``baseline`` (``bins - 1`` at most)."""
    ordered, n = sorted(baseline), len(baseline)
    return sorted({ordered[math.ceil(j * n / bins) - 1] for j in range(1, bins)}) if n else []


def psi(counts_a: Sequence[int], counts_b: Sequence[int], epsilon: float = EPSILON) -> float:
    """Population stability index of two binned samples (empty bins count as ``epsilon``)."""
    n_a, n_b = sum(counts_a), sum(counts_b)
    if len(counts_a) != len(counts_b) or n_a == 0 or n_b == 0:
        raise ValueError("PSI needs two non-empty samples binned the same way")
    pairs = zip(counts_a, counts_b, strict=True)
    shares = [((ca / n_a) or epsilon, (cb / n_b) or epsilon) for ca, cb in pairs]
    return math.fsum((pb - pa) * math.log(pb / pa) for pa, pb in shares)


def ks_statistic(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sample KS statistic D = max |F_a(x) - F_b(x)| over all observed x (ties handled)."""
    if not a or not b:
        raise ValueError("KS needs a non-empty sample on each side")
    sa, sb = sorted(a), sorted(b)
    # both ECDFs evaluated at each observed x, after every copy of a tied value
    steps = (bisect_right(sa, x) / len(sa) - bisect_right(sb, x) / len(sb) for x in {*sa, *sb})
    return max(abs(step) for step in steps)


def kolmogorov_sf(x: float) -> float:
    """P(K > x) for the Kolmogorov distribution (the asymptotic KS null distribution)."""
    if x <= 0.0:
        return 1.0
    if x < 1.18:
        # theta-function form: converges fast for small x, where the alternating one does not
        y = math.pi**2 / (8.0 * x * x)
        cdf = math.sqrt(2.0 * math.pi) / x * math.fsum(math.exp(-(k * k) * y) for k in (1, 3, 5, 7))
        return min(1.0, max(0.0, 1.0 - cdf))
    terms = [2.0 * (-1) ** (k - 1) * math.exp(-2.0 * k * k * x * x) for k in range(1, 101)]
    return min(1.0, max(0.0, math.fsum(terms)))


def ks_p_value(d: float, n_a: int, n_b: int) -> float:
    """Asymptotic two-sided p-value of a two-sample KS statistic ``d``."""
    return kolmogorov_sf(math.sqrt(n_a * n_b / (n_a + n_b)) * d)


def psi_flag(value: float, thresholds: Thresholds) -> Flag:
    """``none`` below the moderate threshold, ``drift`` at or above the drift threshold."""
    t = thresholds
    return "drift" if value >= t.psi_drift else "moderate" if value >= t.psi_moderate else "none"


def two_proportion_z(x_a: int, n_a: int, x_b: int, n_b: int) -> tuple[float, float]:
    """Pooled two-proportion z statistic (b minus a) and its two-sided p-value."""
    if n_a == 0 or n_b == 0:
        raise ValueError("the z-test needs rows on each side")
    pooled = (x_a + x_b) / (n_a + n_b)
    se = math.sqrt(pooled * (1.0 - pooled) * (1.0 / n_a + 1.0 / n_b))
    if se == 0.0:
        return 0.0, 1.0  # both rates are 0 or both are 1: no evidence of a difference
    z = (x_b / n_b - x_a / n_a) / se
    return z, math.erfc(abs(z) / math.sqrt(2.0))


# -- per-row quantities ----------------------------------------------------------------------


def _extract(row: RowMap, name: str) -> float | None:
    if name not in ("contextCount", "retrieval.bestChunk"):
        return as_number(get_path(row, name))
    chunks = get_path(row, "retrieval.chunkRelevance")
    if not isinstance(chunks, Mapping):
        return None  # a failed row: no judgments, hence no context count either
    if name == "contextCount":
        return float(len(chunks))
    return max((v for v in map(as_number, chunks.values()) if v is not None), default=None)


UNBOUNDED: tuple[str, ...] = ("queryTokens", "contextCount")  # quantile bins of the baseline
PROBABILITIES: tuple[str, ...] = (
    "retrieval.sufficiency",
    "retrieval.conflict",
    "retrieval.bestChunk",
    "generation.relevance",
    "generation.groundedness",
    "generation.contradiction",
    "generation.correctness",
    "generation.abstention",
)


def _rows(report: RowMap) -> list[RowMap]:
    # each quantity is named by its JSON path in the row (the names the Markdown shows)
    return [row.json for row in report_rows(report)]


def compare_quantity(
    name: str, a: Sequence[float], b: Sequence[float], probability: bool, thresholds: Thresholds
) -> Quantity:
    """PSI (fixed or baseline-quantile bins), KS and the flag of one non-empty quantity."""
    edges = PROBABILITY_EDGES if probability else quantile_edges(a)
    value = psi(bin_counts(a, edges, not probability), bin_counts(b, edges, not probability))
    d = ks_statistic(a, b)
    return Quantity(
        name=name,
        binning="fixed" if probability else "quantile",
        n_a=len(a),
        n_b=len(b),
        psi=value,
        ks=d,
        ks_p_value=ks_p_value(d, len(a), len(b)),
        flag=psi_flag(value, thresholds),
    )


def abstention_rate(
    a: Sequence[float], b: Sequence[float], thresholds: Thresholds
) -> AbstentionRate:
    """Abstention rates (P >= the threshold) of two non-empty samples and their z-test."""
    cut = thresholds.abstention_threshold
    x_a, x_b = sum(p >= cut for p in a), sum(p >= cut for p in b)
    z, p_value = two_proportion_z(x_a, len(a), x_b, len(b))
    t = thresholds
    flag: Flag = (
        "drift" if p_value < t.alpha_drift else "moderate" if p_value < t.alpha_moderate else "none"
    )
    return AbstentionRate(
        n_a=len(a), n_b=len(b), a=x_a / len(a), b=x_b / len(b), z=z, p_value=p_value, flag=flag
    )


def distribution_drift(
    a: ReportData, b: ReportData, thresholds: Thresholds | None = None
) -> DriftReport:
    """Distribution drift from report ``a`` (baseline) to report ``b`` (typed or parsed JSON)."""
    a, b = as_json(a), as_json(b)
    thresholds = thresholds or Thresholds()
    rows_a, rows_b = _rows(a), _rows(b)
    quantities: list[Quantity] = []
    notes: list[str] = []
    rate: AbstentionRate | None = None
    for name in (*UNBOUNDED, *PROBABILITIES):
        va = [v for v in (_extract(r, name) for r in rows_a) if v is not None]
        vb = [v for v in (_extract(r, name) for r in rows_b) if v is not None]
        missing = " and ".join(side for side, v in (("A", va), ("B", vb)) if not v)
        if missing:
            also = " (so is the abstention rate)" if name == "generation.abstention" else ""
            notes.append(f"{name}: skipped{also}, missing in report {missing}")
            continue
        quantities.append(compare_quantity(name, va, vb, name in PROBABILITIES, thresholds))
        if name == "generation.abstention":
            rate = abstention_rate(va, vb, thresholds)
    changes = setup_changes(a, b)
    return DriftReport(
        thresholds=thresholds,
        quantities=quantities,
        abstention_rate=rate,
        model_changes=[c for c in changes if c.kind == "model"],
        pricing_changes=[c for c in changes if c.kind == "pricing"],
        notes=notes,
    )


def drift_markdown(
    report: DriftReport, a_name: str = "A", b_name: str = "B", include_changes: bool = True
) -> str:
    """The report as a Markdown section (``###`` headings, to follow ``diff_markdown``).

    ``include_changes=False`` leaves out the model/pricing table when the diff already has one.
    """
    t, r = report.thresholds, report.abstention_rate
    lines = [
        "### Distribution drift",
        "",
        f"PSI flags: moderate >= {fmt(t.psi_moderate)}, drift >= {fmt(t.psi_drift)}; "
        f"KS p-value is asymptotic. Abstention rate (P >= {fmt(t.abstention_threshold)}): "
        f"two-proportion z-test, moderate p < {fmt(t.alpha_moderate)}, "
        f"drift p < {fmt(t.alpha_drift)}.",
        "",
    ]
    rows = [
        (f"`{q.name}`", str(q.n_a), str(q.n_b), fmt(q.psi), fmt(q.ks), fmt(q.ks_p_value), q.flag)
        for q in report.quantities
    ]
    header = ("Quantity", f"n {a_name}", f"n {b_name}", "PSI", "KS D", "KS p", "Flag")
    lines += markdown_table(header, rows) if rows else ["No quantity present in both reports."]
    if r is not None:
        cells = (fmt(r.a), fmt(r.b), fmt(r.z), fmt(r.p_value), r.flag)
        lines += ["", "#### Abstention rate", ""]
        lines += markdown_table((a_name, b_name, "z", "p", "Flag"), [cells])
    if include_changes:
        changes = [*report.model_changes, *report.pricing_changes]
        body = [(f"`{c.path}`", fmt(c.before), fmt(c.after)) for c in changes]
        lines += ["", "#### Model release and pricing", ""]
        lines += markdown_table(("Field", a_name, b_name), body) if body else ["No change."]
    lines += ["", *(f"- {note}" for note in report.notes)] if report.notes else []
    return "\n".join(lines) + "\n"
