"""Report rows as calibration and the audit read them: through the report's own models (pure).

The views (:data:`RowView`, :data:`ReportView`) are the report package's, shared with the
comparisons; this module adds what calibration needs of a row: its signals in
:data:`JUDGMENT_NAMES` order.
"""

from __future__ import annotations

from ragbatch.core import JUDGMENTS, ConfigError, GenerationJudgments, RetrievalJudgments

# The views live with the report's models (the comparisons read rows through them too).
from ragbatch.report import (
    ROW_FIELDS,
    DatasetView,
    ReportView,
    RowView,
    report_view,
    row_view,
)

__all__ = [
    "JUDGMENT_NAMES",
    "ROW_FIELDS",
    "DatasetView",
    "ReportView",
    "RowView",
    "report_view",
    "row_view",
    "signals_from",
]

JUDGMENT_NAMES = JUDGMENTS  # the policy's order (docs/semantics.md §1)


def signals_from(
    row_id: str | None,
    retrieval: RetrievalJudgments | None,
    generation: GenerationJudgments | None,
) -> tuple[float | None, ...]:
    """A row's P(true) per judgment in ``JUDGMENT_NAMES`` order (the best chunk for
    chunkRelevance); a judgment every row is asked must be there (ConfigError)."""
    r = retrieval or RetrievalJudgments()
    g = generation or GenerationJudgments()
    required = (
        ("retrieval.sufficiency", r.sufficiency),
        ("retrieval.conflict", r.conflict),
        ("generation.relevance", g.relevance),
        ("generation.groundedness", g.groundedness),
        ("generation.contradiction", g.contradiction),
    )
    for name, value in required:
        if value is None:
            raise ConfigError(
                f"row {row_id or '?'}: judgment {name} is missing; calibration needs every "
                "judgment of successful rows (was the report produced by ragbatch run?)"
            )
    best = max(r.chunk_relevance.values()) if r.chunk_relevance else None
    return (best, r.sufficiency, r.conflict, g.relevance, g.groundedness, g.contradiction,
            g.correctness)  # fmt: skip
