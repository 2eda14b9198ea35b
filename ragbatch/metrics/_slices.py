"""Slices: the key metrics per segment of the rows, flagging sharp drops (pure: no I/O).

An aggregate can hide a regression in one segment (docs/semantics.md §3b).
Each row gets slice keys: three built in, plus chosen metadata fields.

- ``queryLength``: whitespace tokens of the question, "≤5", "6-14" (en dash) or "≥15".
- ``contextCount``: retrieved contexts, "0", "1", "2-3", "4-6" or "7+".
- ``nearDuplicateTop3``: "yes" when any two of the top-3 context texts have a token Jaccard
  similarity >= 0.9 (duplicates or stale copies crowding the top), else "no".
- ``hops`` and ``turns``, for a multi-step trace only (docs/semantics.md §8a): its retrieval
  steps, "0", "1", "2", "3", "4-6" or "7+", and its turns, "1", "2", "3", "4-6" or "7+". A
  row has neither key, so a run of rows alone has no such slice.
- a metadata field by name (``--slice-by topic``); a missing or null value is "(none)". A
  dotted name reaches into nested metadata; a field named like a built-in slice is keyed
  ``metadata.<name>``.

:func:`slice_table` works on compact items (slice keys + per-row numbers), so a report can be
sliced without the dataset; :class:`SliceAccumulator` builds the same mean-metric table one item
at a time, in memory that does not grow with the rows. The flag rule is :data:`RULE` (see
:func:`rule_text`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any, NamedTuple

import orjson

from ragbatch.metrics._scores import ExactSum, Out

NONE_VALUE = "(none)"
NEAR_DUPLICATE_JACCARD = 0.9
DEFAULT_MIN_ROWS = 5
DEFAULT_DROP = 0.10
# Float noise must not flag a drop of exactly ``drop`` (0.8 - 0.7 > 0.1 in binary floats).
EPSILON = 1e-9
BUILTIN_ORDER: dict[str, tuple[str, ...]] = {
    "queryLength": ("≤5", "6\u201314", "≥15"),
    "contextCount": ("0", "1", "2-3", "4-6", "7+"),
    "nearDuplicateTop3": ("yes", "no"),
    "hops": ("0", "1", "2", "3", "4-6", "7+"),
    "turns": ("1", "2", "3", "4-6", "7+"),
}
TRACE_DIMENSIONS = ("hops", "turns")  # a trace's own slices (§8a)

Value = float | bool | None
MetricFn = Callable[[Sequence["SliceItem"]], float | None]


def rule_text(min_rows: int = DEFAULT_MIN_ROWS, drop: float = DEFAULT_DROP) -> str:
    """The flag rule in words, for the report."""
    return (
        f"A slice is flagged when it has at least {min_rows} rows and any key metric is worse "
        f"than on the whole set by more than {drop:g} (absolute): lower for higher-is-better "
        "metrics, higher for lower-is-better ones. Metrics a slice cannot compute are skipped."
    )


RULE = rule_text()


def query_length_bucket(question: str) -> str:
    """ "≤5", "6-14" (en dash) or "≥15" whitespace tokens."""
    n = len(question.split())
    return "≤5" if n <= 5 else "6\u201314" if n <= 14 else "≥15"


def context_count_bucket(count: int) -> str:
    """ "0", "1", "2-3", "4-6" or "7+" contexts."""
    if count <= 1:
        return str(max(count, 0))
    return "2-3" if count <= 3 else "4-6" if count <= 6 else "7+"


def hops_bucket(count: int) -> str:
    """ "0", "1", "2", "3", "4-6" or "7+" retrieval steps of a trace."""
    return str(max(count, 0)) if count <= 3 else "4-6" if count <= 6 else "7+"


def turns_bucket(count: int) -> str:
    """ "1", "2", "3", "4-6" or "7+" turns of a trace (a trace has at least one)."""
    return str(max(count, 1)) if count <= 3 else "4-6" if count <= 6 else "7+"


_WORD = re.compile(r"\w+")
# An ASCII byte -> itself lowercased when ``\w`` matches it ([A-Za-z0-9_]), else a space.
_ASCII_WORDS = bytes.maketrans(
    bytes(range(128)),
    bytes(ord(chr(c).lower()) if chr(c).isalnum() or chr(c) == "_" else 32 for c in range(128)),
)


def _token_sets(texts: Sequence[str]) -> list[set[str]] | list[set[bytes]]:
    r"""Each text's casefolded ``\w+`` tokens, as sets comparable with one another (only
    compared, never shown). When every text is ASCII (most are), each is lowercased and split
    by one byte table instead of the regex: the same tokens, as bytes, in under half the time
    (5.6 vs 11.8 µs for a 400-character context; this runs on every context of every row).
    Otherwise every text goes through the regex, as str."""
    if all(text.isascii() for text in texts):
        return [set(text.encode().translate(_ASCII_WORDS).split()) for text in texts]
    return [set(_WORD.findall(text.casefold())) for text in texts]


def _overlap(left: AbstractSet[object], right: AbstractSet[object]) -> float:
    if not left and not right:
        return 1.0
    shared = len(left & right)
    return shared / (len(left) + len(right) - shared)  # the union's size, not the union


def jaccard(a: str, b: str) -> float:
    """Token Jaccard similarity of two texts (casefolded word tokens; two empties are 1)."""
    left, right = _token_sets((a, b))
    return _overlap(left, right)


def is_near_duplicate_top3(texts: Sequence[str]) -> bool:
    """Whether any two of the first three texts are near-identical (Jaccard >= 0.9)."""
    top = _token_sets(texts[:3])  # each text tokenized once, not once a pair
    return any(
        _overlap(top[i], top[j]) >= NEAR_DUPLICATE_JACCARD
        for i in range(len(top))
        for j in range(i + 1, len(top))
    )


def has_metadata_value(metadata: Mapping[str, Any] | None, field: str) -> bool:
    """Whether ``--slice-by field`` finds a value (not missing, not null) in this metadata."""
    return _lookup(metadata, field) is not None


def metadata_fields(metadata: Mapping[str, Any] | None, prefix: str = "") -> set[str]:
    """Every name ``--slice-by`` accepts for this metadata: its keys and dotted nested keys."""
    names: set[str] = set()
    for key, value in (metadata or {}).items():
        name = f"{prefix}{key}"
        names.add(name)
        if isinstance(value, Mapping):
            names |= metadata_fields(value, f"{name}.")
    return names


def _lookup(metadata: Mapping[str, Any] | None, field: str) -> Any:
    value: Any = metadata
    if metadata is not None and field in metadata:
        return metadata[field]
    for part in field.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    return value


def _metadata_value(metadata: Mapping[str, Any] | None, field: str) -> str:
    value = _lookup(metadata, field)
    if value is None:
        return NONE_VALUE
    if isinstance(value, str):
        return value
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def slice_keys(
    question: str,
    context_texts: Sequence[str],
    metadata: Mapping[str, Any] | None = None,
    fields: Sequence[str] = (),
    trace: tuple[int, int] | None = None,
) -> dict[str, str]:
    """The slice value of each dimension for one row: built-ins first (``hops`` and
    ``turns`` when ``trace`` gives a trace's hop and turn counts), then metadata fields."""
    keys = {
        "queryLength": query_length_bucket(question),
        "contextCount": context_count_bucket(len(context_texts)),
        "nearDuplicateTop3": "yes" if is_near_duplicate_top3(context_texts) else "no",
    }
    if trace is not None:
        keys |= {"hops": hops_bucket(trace[0]), "turns": turns_bucket(trace[1])}
    for field in fields:
        name = f"metadata.{field}" if field in BUILTIN_ORDER else field
        keys[name] = _metadata_value(metadata, field)
    return keys


class SliceItem(NamedTuple):
    """One row, compactly: its slice keys and its per-row metric values (None = n/a)."""

    keys: Mapping[str, str]
    values: Mapping[str, Value]


def mean_of(name: str) -> MetricFn:
    """A metric: the mean of ``values[name]`` over items that have it (True = 1), or None."""

    def metric(items: Sequence[SliceItem]) -> float | None:
        present = [float(v) for item in items if (v := item.values.get(name)) is not None]
        return math.fsum(present) / len(present) if present else None

    return metric


def mean_metrics(names: Sequence[str]) -> dict[str, MetricFn]:
    """``{name: mean_of(name)}`` for each name."""
    return {name: mean_of(name) for name in names}


class Slice(Out):
    """One value of one dimension: its rows, key metrics, deltas to the whole, and the flag."""

    dimension: str
    value: str
    rows: int
    metrics: dict[str, float | None]
    deltas: dict[str, float | None]
    flag: bool
    reason: str | None = None


def _order(dimension: str, values: Collection[str]) -> list[str]:
    known = BUILTIN_ORDER.get(dimension)
    if known is not None:
        return [v for v in known if v in values]
    return sorted(values, key=lambda v: (v == NONE_VALUE, v))


def _slice(
    dimension: str,
    value: str,
    rows: int,
    metrics: dict[str, float | None],
    whole: Mapping[str, float | None],
    min_rows: int,
    drop: float,
    lower_is_better: Collection[str],
) -> Slice:
    """One slice from its metrics: deltas to the whole and the flag per :func:`rule_text`."""
    deltas: dict[str, float | None] = {}
    reasons: list[str] = []
    for name, got in metrics.items():
        ref = whole[name]
        if got is None or ref is None:
            deltas[name] = None
            continue
        deltas[name] = got - ref
        worse = got - ref if name in lower_is_better else ref - got
        if rows >= min_rows and worse > drop + EPSILON:
            reasons.append(f"{name} {got:.3f} vs {ref:.3f} on the whole")
    return Slice(
        dimension=dimension,
        value=value,
        rows=rows,
        metrics=metrics,
        deltas=deltas,
        flag=bool(reasons),
        reason="; ".join(reasons) if reasons else None,
    )


def slice_table(
    items: Sequence[SliceItem],
    metric_fns: Mapping[str, MetricFn],
    min_rows: int = DEFAULT_MIN_ROWS,
    drop: float = DEFAULT_DROP,
    lower_is_better: Collection[str] = (),
) -> list[Slice]:
    """Every (dimension, value) slice with its metrics, flagged per :func:`rule_text`.

    Dimensions come in order of first appearance in the items' keys; values in a fixed order
    for the built-ins, else sorted with "(none)" last. A delta is slice minus whole.
    """
    whole = {name: fn(items) for name, fn in metric_fns.items()}
    dimensions: dict[str, set[str]] = {}
    for item in items:
        for dimension, value in item.keys.items():
            dimensions.setdefault(dimension, set()).add(value)
    table: list[Slice] = []
    for dimension, values in dimensions.items():
        for value in _order(dimension, values):
            group = [item for item in items if item.keys.get(dimension) == value]
            metrics = {name: fn(group) for name, fn in metric_fns.items()}
            table.append(
                _slice(
                    dimension, value, len(group), metrics, whole, min_rows, drop, lower_is_better
                )
            )
    return table


class _Means:
    """A row count and, per metric, the count and exact sum of the values present."""

    __slots__ = ("counts", "rows", "sums")

    def __init__(self, metrics: int) -> None:
        self.rows = 0
        self.counts = [0] * metrics
        self.sums = [ExactSum() for _ in range(metrics)]

    def add(self, values: Sequence[float | None]) -> None:
        self.rows += 1
        for i, value in enumerate(values):
            if value is not None:
                self.counts[i] += 1
                self.sums[i].add(value)

    def means(self, names: Sequence[str]) -> dict[str, float | None]:
        return {
            name: total.value() / count if count else None
            for name, count, total in zip(names, self.counts, self.sums, strict=True)
        }


class SliceAccumulator:
    """``slice_table(items, mean_metrics(names), ...)``, fed one item at a time.

    Keeps, per (dimension, value) and for the whole, a row count and per metric a count and an
    exact sum (equal to ``math.fsum``), so memory grows with the distinct slice values, never
    with the rows. The table is identical, order included.
    """

    __slots__ = ("_cells", "_rule", "_whole", "names")

    def __init__(
        self,
        names: Sequence[str],
        min_rows: int = DEFAULT_MIN_ROWS,
        drop: float = DEFAULT_DROP,
        lower_is_better: Collection[str] = (),
    ) -> None:
        self.names = tuple(dict.fromkeys(names))
        self._rule = (min_rows, drop, lower_is_better)
        self._whole = _Means(len(self.names))
        self._cells: dict[str, dict[str, _Means]] = {}

    def add(self, item: SliceItem) -> None:
        values = [None if (v := item.values.get(name)) is None else float(v) for name in self.names]
        self._whole.add(values)
        for dimension, value in item.keys.items():
            cells = self._cells.setdefault(dimension, {})
            cell = cells.get(value)
            if cell is None:
                cell = cells[value] = _Means(len(self.names))
            cell.add(values)

    def result(self) -> list[Slice]:
        whole = self._whole.means(self.names)
        return [
            _slice(dimension, value, cell.rows, cell.means(self.names), whole, *self._rule)
            for dimension, cells in self._cells.items()
            for value in _order(dimension, cells)
            for cell in (cells[value],)
        ]
