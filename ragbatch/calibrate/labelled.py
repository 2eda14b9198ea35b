"""The labelled rows of a report, read through the report's own models (pure).

Calibration reads a few fields of each report row; their names and types come from
:class:`ragbatch.report.models.RowResult` (one schema, not restated here as string keys), so a
renamed or retyped field breaks here at once instead of silently reading None.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, create_model
from pydantic.alias_generators import to_camel

from ragbatch.calibrate.rules import JUDGMENTS, Signals
from ragbatch.core.errors import ConfigError
from ragbatch.core.schema import GenerationJudgments, RetrievalJudgments
from ragbatch.report.models import RowResult

# The fields of a report row calibration reads, typed as the report defines them.
_READ = ("id", "status", "retrieval", "generation", "diagnosis", "confidence", "expected")
_OPTIONAL = ("retrieval", "generation", "diagnosis", "confidence", "expected", "claim_summary")


class _Base(BaseModel):
    model_config = ConfigDict(
        frozen=True, extra="ignore", alias_generator=to_camel, populate_by_name=True
    )


_Row: type[BaseModel] = create_model(  # type: ignore[call-overload]
    "CalibrationRow",
    __base__=_Base,
    **{
        name: (RowResult.model_fields[name].annotation, None if name in _OPTIONAL else ...)
        for name in (*_READ, "claim_summary")
    },
)


@dataclass(frozen=True, slots=True)
class Labelled:
    """One successful row with an expected diagnosis, as calibration needs it."""

    id: str
    signals: Signals
    expected: str
    diagnosis: str | None
    confidence: float


def labelled(rows: Sequence[Mapping[str, Any]]) -> list[Labelled]:
    """The successful rows with an expected diagnosis, in order.

    Raises :class:`ConfigError` on a claim-mode row, a missing judgment, or a row that does
    not match the report schema (naming the row).
    """
    out: list[Labelled] = []
    for raw in rows:
        if raw.get("status") != "ok" or raw.get("expected") is None:
            continue  # failed or unlabelled: calibration does not read them
        try:
            row: Any = _Row.model_validate(raw)
        except ValidationError as e:
            first = e.errors()[0]
            where = ".".join(str(part) for part in first["loc"])
            raise ConfigError(
                f"row {raw.get('id', '?')}: {where}: {first['msg']} (was the report produced "
                "by ragbatch run?)"
            ) from None
        if row.claim_summary is not None:
            raise ConfigError(
                f"row {row.id}: claim-mode rows cannot be calibrated yet (their "
                "groundedness comes from claim verdicts); calibrate a basic-mode report"
            )
        signals = signals_from(row.id, row.retrieval, row.generation)
        out.append(
            Labelled(row.id, signals, str(row.expected), row.diagnosis, row.confidence or 0.0)
        )
    return out


def signals_from(
    row_id: str, retrieval: RetrievalJudgments | None, generation: GenerationJudgments | None
) -> Signals:
    """The signals in ``JUDGMENTS`` order; a judgment every row is asked must be there."""
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
                f"row {row_id}: judgment {name} is missing; calibration needs every "
                "judgment of successful rows (was the report produced by ragbatch run?)"
            )
    best = max(r.chunk_relevance.values()) if r.chunk_relevance else None
    values = {
        "chunkRelevance": best,
        "contextSufficiency": r.sufficiency,
        "contextConflict": r.conflict,
        "answerRelevance": g.relevance,
        "groundedness": g.groundedness,
        "contradiction": g.contradiction,
        "correctness": g.correctness,
    }
    return tuple(values[name] for name in JUDGMENTS)
