"""What changed between two reports, and dotted-path access to parsed JSON (pure: no I/O).

``diff_reports(a, b)`` lists rows whose diagnosis flipped (a failed row has none), rows added
or removed, the deltas of a fixed list of headline metrics (:data:`HEADLINE_PATHS`), and the
setup changes (:data:`CHANGE_PATHS`: policy, thresholds, routing, model, pricing), which come
first in the Markdown: a threshold or policy change can explain every flip below it. ``ragbatch.compare._gate`` re-exports it
next to the gate. Paths are dotted keys of the report JSON (``retrievalRanking.at.10.recall``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, NamedTuple

from ragbatch.metrics import Out
from ragbatch.report import Report, report_json, report_view, row_view

# A report as the typed model or as the parsed JSON of its file (what a test or a script has).
ReportData = Report | Mapping[str, Any]

HEADLINE_PATHS: tuple[str, ...] = (
    "modes.jevOnly.classification.accuracy",
    "modes.jevOnly.classification.macroF1",
    "modes.jevOnly.calibration.ece",
    "modes.jevOnly.selective.aurc",
    "modes.jevOnly.failures.rate",
    "modes.jevOnly.latency.p50Ms",
    "modes.jevOnly.latency.p95Ms",
    "modes.jevOnly.cost.usd",
    "modes.jevOnly.components.retrieval.chunkRelevance.accuracy",
    "modes.jevOnly.components.retrieval.contextSufficiency.accuracy",
    "modes.jevOnly.components.generation.groundedness.accuracy",
    "modes.jevOnly.components.generation.answerRelevance.accuracy",
    "modes.jevOnly.claims.answerLevelAccuracy",
    "modes.jevOnly.abstention.accuracy",
    "modes.jevOnly.abstention.falseAbstentionRate",
    "modes.jevOnly.abstention.falseAnswerRate",
    "modes.baseline.classification.accuracy",
    "modes.baseline.cost.usd",
    "modes.cascade.endToEnd.accuracy",
    "modes.cascade.endToEnd.costUsd",
    "modes.cascade.fallbackRate",
    "retrievalRanking.mrr",
    "retrievalRanking.at.1.hit",
    "retrievalRanking.at.10.recall",
    "retrievalRanking.at.5.precision",
    "retrievalRanking.at.5.contextPrecision",
    "retrievalRanking.at.10.ndcg",
    "answerChecks.containsPassRate",
    "answerChecks.mustNotContainPassRate",
    "traces.firstFailingStep.rate",
    "traces.firstFailingStepAccuracy.accuracy",
    "traces.wastedHops.rate",
    "traces.noRetrieval.rate",
)
ChangeKind = Literal["policy", "thresholds", "routing", "model", "pricing"]
CHANGE_KINDS: dict[str, ChangeKind] = {
    "policy.name": "policy",
    "policy.version": "policy",
    "policy.precedence": "policy",
    "policy.failThreshold": "thresholds",
    "policy.passThreshold": "thresholds",
    "policy.perJudgment": "thresholds",
    "policy.routing": "routing",  # absent: showcase
    "provider.baseline": "routing",
    "modes.jevOnly.routes.auto": "routing",
    "modes.jevOnly.routes.fallback": "routing",
    "modes.jevOnly.routes.failed": "routing",
    "provider.requestedModel": "model",
    "provider.answeredBy": "model",
    "decisions.variant": "model",
    "decisions.version": "model",
    "pricing.version": "pricing",
    "pricing.effectiveDate": "pricing",
    "pricing.sha256": "pricing",
}
CHANGE_PATHS: tuple[str, ...] = tuple(CHANGE_KINDS)


def as_json(report: ReportData) -> Mapping[str, Any]:
    """The JSON the paths address: a typed report dumped once (as its file is written), parsed
    JSON as it is."""
    return report_json(report) if isinstance(report, Report) else report


def get_path(data: Any, path: str) -> Any:
    """The value at a dotted path of parsed JSON, or None when any step is missing."""
    for part in path.split("."):
        if not isinstance(data, Mapping):
            return None
        data = data.get(part)
    return data


def as_number(value: Any) -> float | None:
    """A finite JSON number as float; None for anything else (booleans included)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


class Row(NamedTuple):
    """A report row: its typed fields (a :data:`ragbatch.report.RowView`, the report models'
    names and types) and its JSON, which the rules' row paths address."""

    view: Any
    json: Mapping[str, Any]


def report_rows(report: Mapping[str, Any]) -> list[Row]:
    """The report's ``rows[]`` read through the report's views, in row order; a field of the
    wrong type is a ConfigError naming the row and the field."""
    return [Row(row_view(raw), raw) for raw in report_view(report).rows]


def rows_by_id(report: Mapping[str, Any]) -> dict[str, Row]:
    """The report's rows keyed by ``id``, in row order (rows without an id skipped)."""
    return {row.view.id: row for row in report_rows(report) if row.view.id is not None}


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    """A GitHub Markdown table as lines (cells are escaped for ``|``)."""

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"

    return [line(header), "|" + "---|" * len(header), *(line(cells) for cells in rows)]


def fmt(value: Any) -> str:
    """A cell: numbers to 4 significant digits, None as a dash, lists comma-joined."""
    if value is None:
        return "—"
    if isinstance(value, list):
        return ", ".join(fmt(v) for v in value)
    if isinstance(value, Mapping):
        return ", ".join(f"{k}: {fmt(v)}" for k, v in value.items())
    number = as_number(value)
    return f"{number:.4g}" if number is not None else str(value)


class Flip(Out):
    """A row whose diagnosis differs, or a trace whose first failing step does; ``change``
    says fixed/broken against ``expected`` (a trace's step: against its label)."""

    id: str
    before: str | None
    after: str | None
    expected: str | None
    change: Literal["fixed", "broken", "changed"]
    before_step: int | None = None  # a trace's first failing step (docs/semantics.md §8a)
    after_step: int | None = None


class Delta(Out):
    """A headline metric present in either report; ``delta`` = after - before, or None."""

    path: str
    before: float | None
    after: float | None
    delta: float | None


class Change(Out):
    """A setup field (policy, thresholds, routing, model, pricing) that differs."""

    kind: ChangeKind
    path: str
    before: Any
    after: Any


class Diff(Out):
    """Everything :func:`diff_reports` found, each list in a deterministic order."""

    flipped: list[Flip]
    added: list[str]
    removed: list[str]
    deltas: list[Delta]
    changes: list[Change]


def _flip(row_id: str, a: Any, b: Any) -> Flip | None:
    before, after = a.diagnosis, b.diagnosis
    steps = a.first_failing_step, b.first_failing_step
    if before == after and steps[0] == steps[1]:
        return None
    # the later report's expectation when it states one (even null), else the earlier's
    expected = b.expected if "expected" in b.model_fields_set else a.expected
    change: Literal["fixed", "broken", "changed"] = "changed"
    if before == after:  # the same diagnosis, another first failing step: its label decides
        matched = a.first_failing_step_match, b.first_failing_step_match
        if matched == (False, True):
            change = "fixed"
        elif matched == (True, False):
            change = "broken"
    elif expected is not None and after == expected:
        change = "fixed"
    elif expected is not None and before == expected:
        change = "broken"
    return Flip(
        id=row_id,
        before=before,
        after=after,
        expected=expected,
        change=change,
        before_step=steps[0],
        after_step=steps[1],
    )


def setup_changes(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[Change]:
    """The :data:`CHANGE_PATHS` whose values differ, in that order (policy first)."""
    return [
        Change(
            kind=CHANGE_KINDS[path], path=path, before=get_path(a, path), after=get_path(b, path)
        )
        for path in CHANGE_PATHS
        if get_path(a, path) != get_path(b, path)
    ]


def diff_reports(a: ReportData, b: ReportData) -> Diff:
    """What changed from report ``a`` to report ``b`` (rows in ``a``'s order, then ``b``'s)."""
    a, b = as_json(a), as_json(b)
    rows_a, rows_b = rows_by_id(a), rows_by_id(b)
    flips = (_flip(i, row.view, rows_b[i].view) for i, row in rows_a.items() if i in rows_b)
    deltas: list[Delta] = []
    for path in HEADLINE_PATHS:
        before, after = as_number(get_path(a, path)), as_number(get_path(b, path))
        if before is None and after is None:
            continue
        delta = None if before is None or after is None else after - before
        deltas.append(Delta(path=path, before=before, after=after, delta=delta))
    changes = setup_changes(a, b)
    return Diff(
        flipped=[flip for flip in flips if flip is not None],
        added=[i for i in rows_b if i not in rows_a],
        removed=[i for i in rows_a if i not in rows_b],
        deltas=deltas,
        changes=changes,
    )


def _section(title: str, header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    body = markdown_table(header, rows) if rows else ["No change."]
    return ["", f"### {title}", "", *body]


SETUP_TITLE = "Policy, thresholds, routing, model and pricing"
SETUP_NOTE = (
    "The reports were not produced with the same setup ({kinds} changed): the flips and deltas "
    "below may come from these changes rather than from the RAG system."
)


def _verdict(diagnosis: str | None, step: int | None) -> str:
    """A flip's cell: the diagnosis, and a trace's first failing step when it has one."""
    return fmt(diagnosis) + ("" if step is None else f" (step {step})")


def diff_markdown(diff: Diff, a_name: str = "A", b_name: str = "B") -> str:
    """The diff as Markdown: setup changes first (policy, thresholds, routing, model,
    pricing), then flips with row ids, added/removed rows and metric deltas."""
    flips = [
        (f.id, _verdict(f.before, f.before_step), _verdict(f.after, f.after_step),
         fmt(f.expected), f.change)
        for f in diff.flipped
    ]  # fmt: skip
    deltas = [
        (f"`{d.path}`", fmt(d.before), fmt(d.after), fmt(d.delta))
        for d in diff.deltas
        if d.delta != 0.0
    ]
    changes = [(c.kind, f"`{c.path}`", fmt(c.before), fmt(c.after)) for c in diff.changes]
    lines = [f"## ragbatch diff: {a_name} → {b_name}"]
    lines += _section(SETUP_TITLE, ("Kind", "Field", a_name, b_name), changes)
    # route counts are outcomes; the other fields are settings the two runs did not share
    settings = [c.kind for c in diff.changes if not c.path.startswith("modes.")]
    if settings:
        lines += ["", SETUP_NOTE.format(kinds=", ".join(dict.fromkeys(settings)))]
    lines += _section(
        f"Diagnosis flips ({len(flips)})", ("Row", a_name, b_name, "Expected", "Change"), flips
    )
    for title, ids in (("Rows added", diff.added), ("Rows removed", diff.removed)):
        if ids:
            lines += ["", f"### {title} ({len(ids)})", "", ", ".join(f"`{i}`" for i in ids)]
    lines += _section("Metric deltas (changed only)", ("Metric", a_name, b_name, "Δ"), deltas)
    return "\n".join(lines) + "\n"
