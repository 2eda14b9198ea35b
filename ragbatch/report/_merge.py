"""Merge report builders of consecutive row ranges into the builder of the whole (pure).

A :class:`~ragbatch.report._builder.ReportBuilder` keeps counts, exact sums
(:class:`~ragbatch.metrics._scores.ExactSum`), per-row columns and first-seen orders. Built
over consecutive ranges of the input (rows 0..a, a..b, ...) and merged in that order, they
equal the builder that saw every row: counts add, exact sums are exact in any order, columns
and appended lists concatenate in input order, and a dict keeps its keys in first-seen order.
So workers can each summarize their own range and the parent only merges, never re-reads a
row; the report is byte-identical to a single-process one (checked by tests on every
committed dataset).

The merge walks the builder's attributes by type; the few lists that grow with the rows
(rather than one slot per bucket or per threshold) are named in ``APPENDED``, with the length
they are capped at.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from typing import Any

from ragbatch.metrics import ExactSum
from ragbatch.report._builder import ReportBuilder

# (class name, attribute) -> cap of a list appended row by row (None: no cap)
APPENDED: dict[tuple[str, str], int | None] = {
    ("ReportBuilder", "skipped_ids"): None,  # capped below from the module's constant
    ("GoldenAccumulator", "flagged_ids"): None,
    ("ClaimMetricsAccumulator", "jev"): None,
    ("ClaimMetricsAccumulator", "lex"): None,
}
KEEP = (str, bytes, tuple, frozenset, type(None), float)


def _caps() -> dict[tuple[str, str], int | None]:
    from ragbatch.metrics import AUTHORITY_IDS
    from ragbatch.report._builder import INCOMPLETE_IDS

    caps = dict(APPENDED)
    caps["ReportBuilder", "skipped_ids"] = INCOMPLETE_IDS
    caps["GoldenAccumulator", "flagged_ids"] = AUTHORITY_IDS
    return caps


def _merge(a: Any, b: Any, caps: dict[tuple[str, str], int | None]) -> Any:
    """``a`` followed by ``b`` (``a`` may be updated in place and is returned)."""
    if isinstance(a, bool):
        return a or b
    if isinstance(a, int):
        return a + b
    if isinstance(a, KEEP):
        return a  # settings, equal in every part
    if isinstance(a, ExactSum):
        for value in b._partials:
            a.add(value)
        return a
    if isinstance(a, array | bytearray):
        a.extend(b)
        return a
    if isinstance(a, set):
        a |= b
        return a
    if isinstance(a, dict):
        for key, value in b.items():
            a[key] = _merge(a[key], value, caps) if key in a else value
        return a
    if isinstance(a, list):
        if len(a) != len(b):
            raise ValueError(f"cannot merge slot lists of {len(a)} and {len(b)}")
        return [_merge(x, y, caps) for x, y in zip(a, b, strict=True)]
    _merge_object(a, b, caps)
    return a


def _merge_object(a: object, b: object, caps: dict[tuple[str, str], int | None]) -> None:
    if type(a) is not type(b):
        raise TypeError(f"cannot merge {type(a).__name__} with {type(b).__name__}")
    params = getattr(type(a), "__dataclass_params__", None)
    if params is not None and params.frozen:
        return  # frozen settings (RunInfo, Thresholds)
    if hasattr(a, "model_fields"):  # a pydantic model: settings
        return
    name = type(a).__name__
    fields = vars(a) if hasattr(a, "__dict__") else {s: getattr(a, s) for s in a.__slots__}  # type: ignore[attr-defined]
    for attr, mine in fields.items():
        theirs = getattr(b, attr)
        if (name, attr) in caps:
            cap = caps[name, attr]
            joined = [*mine, *theirs]
            setattr(a, attr, joined if cap is None else joined[:cap])
        elif not (name == "ReportBuilder" and attr == "table"):
            setattr(a, attr, _merge(mine, theirs, caps))


def merge_builders(parts: Sequence[ReportBuilder]) -> ReportBuilder:
    """The builder of the parts' rows in order (the first part is updated and returned)."""
    caps = _caps()
    whole = parts[0]
    for part in parts[1:]:
        table = None
        if whole.table is not None and part.table is not None:
            table = [*whole.table, *part.table]
        _merge_object(whole, part, caps)
        limit = whole.info.max_report_rows
        whole.table = None if limit is not None and whole.rows > limit else table
    return whole
