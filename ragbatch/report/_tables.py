"""The report's sections as tables of rounded display strings (pure: no I/O).

Shared by the Markdown summary (:mod:`ragbatch.report._markdown`) and the HTML report
(:mod:`ragbatch.report._html`), so both views round alike. The JSON report stays exact: numbers are
rounded here only, for humans. Sections the report does not have are left out. Later sections
(``retrievalRanking``, ``answerChecks``, abstention, ``slices``) are read from
``report.model_dump(by_alias=True)``, so they render when present and are skipped, not fatal,
when absent; any other extra top-level section of numbers gets a generic key/value table.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from ragbatch.core import Cost
from ragbatch.metrics import BY_KEY, LAYER_ORDER, MATRIX, Component
from ragbatch.report._models import Mode, Report

KNOWN_SECTIONS = {"reportVersion", "dataset", "decisions", "policy", "provider", "pricing", "modes"}
KNOWN_SECTIONS |= {"rows", "slices", "tradeoff", "diagnostics", "routingCurves"}
KNOWN_SECTIONS |= {"traces"}  # its own tables: ragbatch.report._trace_tables
KNOWN_SECTIONS |= {"judgeAudit"}  # its own table: ragbatch.report._audit_view
# Section titles in words; a section not listed here gets its key split into words.
TITLES = {
    "incomplete": "Incomplete run",
    "retrievalRanking": "Retrieval ranking",
    "answerChecks": "Answer checks",
    "chunkAgreement": "Chunk agreement with the golden documents",
    "goldenHealth": "Golden set health",
    "counterfactual": "Counterfactual abstention",
    "authority": "Source authority",
    "rowsOmitted": "Rows left out of the report",
}
FAILURES_TITLE = "Failures by kind"
DIAGNOSTICS_TITLE = "Where to look first (diagnostic matrix)"
DIAGNOSTICS_NOTE = (
    "Trace back from each weak metric to the pipeline layer that owns it and fix the upstream "
    "layer first: retrieval before generation."
)
HEADLINE = "mode,accuracy,overall accuracy,macro-F1,failures,ECE,AURC,p50 latency,p95 latency"
HEADLINE += ",tokens,cost"
LIMITS = (
    "Type-safe output is not infallible judgment: Jev always returns well-formed probabilities, "
    "but they can be wrong. The figures above are measured on this labelled set only. The "
    "thresholds (fail {fail:g} / pass {pass_:g}) are examples, not universal values: calibrate "
    "them on your own labelled data."
)


@dataclass(frozen=True, slots=True)
class Table:
    """One rendered section: a title, column headers and rows of display strings."""

    title: str
    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    note: str = ""


def is_numeric_text(text: str) -> bool:
    """Whether a display string is a number (aligned right): "77.1%", "0.096", "USD 0.002"."""
    head = text.removeprefix("USD ").lstrip("-Δ ")
    return head[:1].isdigit() or text in {"n/a", "—", ""}


def numeric_columns(table: Table) -> tuple[bool, ...]:
    """Per column: every cell is a number (so the column is aligned right)."""
    return tuple(all(is_numeric_text(r[i]) for r in table.rows) for i in range(len(table.headers)))


def pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def num(x: float | None, digits: int = 3) -> str:
    return "n/a" if x is None else f"{x:.{digits}f}"


def ms(x: float | None) -> str:
    return "n/a" if x is None else f"{x:,.0f} ms"


def usd(amount: float | None, currency: str = "USD") -> str:
    """Three significant digits without scientific notation (0.0000640 → 0.000064)."""
    if amount is None:
        return "n/a"
    if amount == 0 or abs(amount) >= 1:
        return f"{currency} {amount:,.2f}"
    decimals = 2 - math.floor(math.log10(abs(amount)))
    return f"{currency} {amount:.{decimals}f}".rstrip("0")


def cost_text(cost: Cost) -> str:
    if not cost.available or cost.usd is None:
        return f"n/a ({cost.reason})" if cost.reason else "n/a"
    return usd(cost.usd, cost.currency or "USD")


def value_text(key: str, value: Any) -> str:
    """A generic leaf value: rates and accuracies as percentages, counts with separators."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if 0.0 <= value <= 1.0 and ("rate" in key.lower() or "accuracy" in key.lower()):
            return pct(value)
        return f"{value:,.3f}" if abs(value) < 1e6 else f"{value:,.0f}"
    return str(value)


def modes_of(report: Report) -> list[tuple[str, Mode]]:
    m = report.modes
    return [("Jev-only", m.jev_only), ("baseline", m.baseline), ("cascade", m.cascade)]


def headline_table(report: Report) -> Table:
    rows = []
    for name, mode in modes_of(report):
        c, lat, use, fail = mode.classification, mode.latency, mode.usage, mode.failures
        acc = f"{pct(c.accuracy)} ({c.correct}/{c.successful})"
        scores = (pct(c.overall_accuracy), num(c.macro_f1), f"{fail.count} ({pct(fail.rate)})")
        risk = (num(mode.calibration.ece), num(mode.selective.aurc), ms(lat.p50_ms), ms(lat.p95_ms))
        tokens = f"{use.input_tokens:,} in / {use.output_tokens:,} out"
        rows.append((name, acc, *scores, *risk, tokens, cost_text(mode.cost)))
    return Table("Headline", tuple(HEADLINE.split(",")), tuple(rows))


def cascade_table(report: Report) -> Table:
    c = report.modes.cascade
    rows = (
        ("fallback rate", f"{pct(c.fallback_rate)} ({c.end_to_end.baseline_calls} rows)"),
        ("resolved by Jev", pct(c.primary_resolved_rate)),
        ("Jev failure rate", pct(c.primary_failure_rate)),
        ("end-to-end failure rate", pct(c.end_to_end.failure_rate)),
    )
    return Table("Cascade", ("", "value"), rows)


def routes_table(report: Report) -> Table:
    routes = report.modes.jev_only.routes
    total = sum(routes.values())
    rows = tuple((r, f"{n:,}", pct(n / total if total else 0.0)) for r, n in routes.items())
    return Table("Routes (Jev-only)", ("route", "rows", "share"), rows)


def _component_row(group: str, name: str, comp: Component) -> tuple[str, ...]:
    scores = (pct(comp.accuracy), num(comp.brier), num(comp.ece)) if comp.count else ("n/a",) * 3
    return (group, name, f"{comp.count:,}", *scores)


def component_table(report: Report) -> Table:
    comps = report.modes.jev_only.components
    rows = []
    for group, model in (("retrieval", comps.retrieval), ("generation", comps.generation)):
        for field in type(model).model_fields:
            rows.append(_component_row(group, field.replace("_", " "), getattr(model, field)))
    return Table(
        "Judgments (Jev-only, each against its own labels)",
        ("stage", "judgment", "count", "accuracy", "Brier", "ECE"),
        tuple(rows),
        "Accuracy at p ≥ 0.5; ECE on confidence max(p, 1 - p). Never folded into one score.",
    )


def claims_tables(report: Report) -> list[Table]:
    claims = report.modes.jev_only.claims
    if claims is None:
        return []
    cc, c = claims.citation_check, claims.classification
    jev, lex = c.per_label, cc.classification.per_label
    per_class = tuple(
        (k, *(num(d[k].f1) if k in d else "n/a" for d in (jev, lex)), str((jev | lex)[k].support))
        for k in list(jev) + [k for k in lex if k not in jev]
    )
    extra = report.model_dump(by_alias=True)["modes"]["jevOnly"]["claims"]
    deferred = extra.get("answerLevelDeferred")
    summary: tuple[tuple[str, ...], ...] = (
        ("claims judged / total", f"{claims.claims:,} / {claims.total_claims:,}", ""),
        ("per-claim accuracy", pct(c.accuracy), pct(cc.classification.accuracy)),
        ("macro-F1", num(c.macro_f1), num(cc.classification.macro_f1)),
        (
            f"answer-level accuracy ({claims.answer_level_rows} rows)",
            pct(claims.answer_level_accuracy),
            pct(cc.answer_level_accuracy),
        ),
        ("ECE", num(claims.calibration.ece), num(cc.calibration.ece)),
        (f"no-fit rate (top option < {claims.no_fit_threshold:g})", pct(claims.no_fit_rate), ""),
        ("uncertain rate", pct(claims.uncertain_rate), ""),
        ("missing citations (not judged)", f"{claims.missing_citations:,}", ""),
        ("answers failed by the veto", f"{claims.rows_failed_by_veto:,}", ""),
    )
    if isinstance(deferred, int):
        summary += (("answers left to the fallback (uncertain claim)", f"{deferred:,}", ""),)
    note = f"{claims.scope} evidence, {claims.extractor} claims. {claims.veto_rule}"
    per_class_headers = ("class", "Jev F1", "citation check F1", "support")
    return [
        Table("Claims", ("", "Jev", "citation check"), summary, note),
        Table("Claims: F1 per class", per_class_headers, per_class),
    ]


def failures_table(report: Report) -> Table:
    kinds: list[str] = []
    for _, mode in modes_of(report):
        kinds += [k for k in mode.failures.by_kind if k not in kinds]
    rows = tuple(
        (kind, *(f"{mode.failures.by_kind.get(kind, 0):,}" for _, mode in modes_of(report)))
        for kind in kinds
    )
    note = "" if rows else "No failed rows."
    return Table(FAILURES_TITLE, ("kind", "Jev-only", "baseline", "cascade"), rows, note)


def _leaves(value: Any, prefix: str = "", depth: int = 0) -> Iterator[tuple[str, Any]]:
    """Numeric and boolean leaves of nested dicts, as (dotted key, value); lists are skipped."""
    if isinstance(value, Mapping) and depth < 4:
        for key, item in value.items():
            yield from _leaves(item, f"{prefix}.{key}" if prefix else str(key), depth + 1)
    elif (isinstance(value, int | float) or value is None) and prefix:
        yield prefix, value


def _ranking_table(section: Mapping[str, Any]) -> Table | None:
    at = section.get("at")
    if not isinstance(at, Mapping) or not at:
        return None
    cols = ("hit", "recall", "precision", "contextPrecision", "ndcg")
    ks = sorted(at, key=lambda k: int(k) if str(k).isdigit() else math.inf)
    rows = tuple((str(k), *(num(dict(at[k]).get(c)) for c in cols)) for k in ks)
    note = f"{value_text('rows', section.get('rows'))} labelled rows, MRR {num(section.get('mrr'))}"
    headers = ("K", "Hit@K", "Recall@K", "Precision@K", "Context precision@K", "NDCG@K")
    return Table("Retrieval ranking", headers, rows, note + ".")


def section_title(key: str) -> str:
    """A report section's title in words: ``goldenHealth`` → "Golden set health"."""
    if key in TITLES:
        return TITLES[key]
    words = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", key).lower()
    return words[:1].upper() + words[1:]


def _chunk_agreement_table(section: Mapping[str, Any]) -> Table | None:
    ks = sorted(section, key=lambda k: int(k) if str(k).isdigit() else math.inf)
    cells = [(k, dict(section[k])) for k in ks if isinstance(section[k], Mapping)]
    if not cells:
        return None
    rows = tuple(
        (str(k), value_text("chunks", c.get("chunks")), pct(c.get("agreement"))) for k, c in cells
    )
    note = "Jev's chunk relevance (p ≥ 0.5) against the golden documents, contexts ranked ≤ K."
    return Table(TITLES["chunkAgreement"], ("K", "chunks", "agreement"), rows, note)


def _golden_health_table(section: Mapping[str, Any]) -> Table | None:
    categories, shares, target = (
        dict(section.get(k) or {}) for k in ("categories", "shares", "target")
    )
    names = list(categories) + [n for n in target if n not in categories]
    if not names:
        return None
    rows = tuple(
        (n, value_text("rows", categories.get(n)), pct(shares.get(n)), pct(target.get(n)))
        for n in names
    )
    warnings = [str(w) for w in section.get("warnings") or []]
    note = f"{value_text('rows', section.get('labelledRows'))} labelled rows. " + (
        " ".join(warnings) if warnings else "No warnings."
    )
    return Table(TITLES["goldenHealth"], ("category", "rows", "share", "target"), rows, note)


def diagnostics_table(report: Report) -> Table | None:
    """The diagnostic matrix's findings (root cause, where to look first), upstream first."""
    if report.diagnostics is None:
        return None
    order = {entry.key: i for i, entry in enumerate(MATRIX)}
    findings = sorted(report.diagnostics, key=lambda f: (LAYER_ORDER[f.layer], order[f.key]))
    rows = []
    for f in findings:
        bound = "—"
        if f.threshold is not None:
            bound = ("min " if BY_KEY[f.key].higher_is_better else "max ") + num(f.threshold)
        rows.append(
            (f.layer, f.metric, num(f.value), bound, f.bad_metric, f.root_cause, f.look_first)
        )
    headers = ("layer", "metric", "value", "limit", "finding", "root cause", "look first")
    note = DIAGNOSTICS_NOTE if rows else "No metric is past its diagnostic limit."
    return Table(DIAGNOSTICS_TITLE, headers, tuple(rows), note)


def _key_value(title: str, section: Any) -> Table | None:
    rows = tuple((key, value_text(key, value)) for key, value in _leaves(section))
    return Table(title, ("metric", "value"), rows) if rows else None


def slices_table(dump: Mapping[str, Any], flagged_only: bool = False) -> Table | None:
    """The ``slices`` section (a list of records, or a dict holding one and maybe a ``rule``)
    as a table: the slice, its size, flag and reason, then its metrics and the deltas
    (prefixed with Δ)."""
    section, rule = dump.get("slices"), ""
    if isinstance(section, Mapping):
        rule = str(section.get("rule") or "")
        section = next((v for v in section.values() if isinstance(v, list)), None)
    records = [r for r in section if isinstance(r, Mapping)] if isinstance(section, list) else []
    if not records:
        return None
    flat = [dict(_slice_cells(r)) for r in records]
    headers: list[str] = []
    for cells in flat:
        headers += [h for h in cells if h not in headers]
    # flag and reason right after the slice's name and size: on a wide table they must not
    # be the columns that scroll off-screen
    first = [h for h in ("dimension", "value", "rows", "flag", "reason") if h in headers]
    headers = first + [h for h in headers if h not in first]
    shown = [c for c, r in zip(flat, records, strict=True) if r.get("flag") or not flagged_only]
    rows = tuple(tuple(c.get(h, "—") for h in headers) for c in shown)
    flagged = sum(bool(r.get("flag")) for r in records)
    note = f"{len(records)} slices, {flagged} flagged. {rule}".strip()
    return Table("Slices" + (" (flagged)" if flagged_only else ""), tuple(headers), rows, note)


def _slice_cells(record: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    for key, value in record.items():
        if isinstance(value, Mapping):
            prefix = "Δ " if key == "deltas" else ("" if key == "metrics" else f"{key}.")
            for name, item in value.items():
                text = num(item) if isinstance(item, float) else value_text(name, item)
                yield f"{prefix}{name}", text
        elif key == "flag":
            yield key, "⚑" if value else ""
        elif not isinstance(value, list):
            yield key, value_text(key, value)


def extra_tables(dump: Mapping[str, Any]) -> list[Table]:
    """Tables for the later sections: ranking, answer checks, abstention, any numeric extra."""
    tables: list[Table | None] = []
    for key, section in dump.items():
        if key in KNOWN_SECTIONS or not isinstance(section, Mapping):
            continue
        title = section_title(key)
        if key == "retrievalRanking":
            tables.append(_ranking_table(section) or _key_value(title, section))
        elif key == "chunkAgreement":
            tables.append(_chunk_agreement_table(section) or _key_value(title, section))
        elif key == "goldenHealth":
            tables.append(_golden_health_table(section) or _key_value(title, section))
        else:
            tables.append(_key_value(title, section))
    abstention = dump.get("modes", {}).get("jevOnly", {}).get("abstention")
    if isinstance(abstention, Mapping):
        tables.append(_key_value("Abstention (Jev-only)", abstention))
    return [t for t in tables if t is not None]


def report_tables(report: Report, slices_flagged_only: bool = True) -> list[Table]:
    """Every section of the summary, in display order (slices: the flagged ones, or all);
    the diagnostic matrix is :func:`diagnostics_table`, placed by each view."""
    tables = [headline_table(report), cascade_table(report), routes_table(report)]
    curves = routing_curves_table(report)
    tables += [component_table(report), *claims_tables(report), failures_table(report)]
    tables += [curves] if curves is not None else []
    dump = report.model_dump(by_alias=True)
    slices = slices_table(dump, flagged_only=slices_flagged_only)
    return tables + extra_tables(dump) + ([slices] if slices else [])


def guarantee_text(report: Report) -> str | None:
    """The deployment answer of a run under a calibrated policy, in one sentence (None when
    the policy carries no guarantee)."""
    g = report.policy.guarantee
    if g is None:
        return None
    cascade = report.modes.cascade
    auto = report.modes.jev_only.routes.get("auto", 0)
    rows = report.modes.jev_only.rows
    return (
        f"At ≤ {g.target_risk:.0%} risk ({g.confidence:.0%} confidence) Jev decides "
        f"{pct(auto / rows if rows else 0.0)} of rows automatically; the cascade then reaches "
        f"{pct(cascade.classification.accuracy)} accuracy at "
        f"{usd(cascade.cost.usd, report.pricing.currency)} and p95 "
        f"{ms(cascade.latency.p95_ms)} ({g.routing} routing; certified by {g.method} on "
        f"{g.certified_on:,} labelled rows, where the estimates were coverage "
        f"{pct(g.estimated_coverage)} and risk {pct(g.estimated_risk)}; assumes {g.assumption})."
    )


def routing_curves_table(report: Report) -> Table | None:
    """Both routings' risk-coverage on the same rows, side by side per threshold pair."""
    curves = report.routing_curves
    if curves is None:
        return None
    names = [c.routing for c in curves.curves]
    headers = ("fail / pass", *(f"{n} {what}" for n in names for what in ("coverage", "risk")))
    rows = tuple(
        (
            f"{points[0].fail_threshold:g} / {points[0].pass_threshold:g}",
            *(cell for p in points for cell in (pct(p.coverage), pct(p.risk))),
        )
        for points in zip(*(c.points for c in curves.curves), strict=True)
    )
    return Table("Routing risk-coverage", headers, rows, curves.note)


def limits_text(report: Report) -> str:
    return LIMITS.format(fail=report.policy.fail_threshold, pass_=report.policy.pass_threshold)


def heading_text(report: Report) -> str:
    d, p = report.dataset, report.provider
    return (
        f"{d.rows:,} rows ({d.labelled_rows:,} labelled) · decision variant "
        f"{report.decisions.variant} · provider {p.name} "
        f"(answered by {', '.join(p.answered_by) or 'n/a'}) · pricing {report.pricing.version}"
    )
