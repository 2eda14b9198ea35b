"""Partial, typed views of report JSON, for the stages that read a report back (pure).

Calibration, the audit and the comparisons read report rows whose fields take their names
and types from :class:`RowResult` and :class:`Report` (one schema, not restated as string
keys), all optional so that partial rows (a test's, a bench's) read the same way; a retyped
or renamed field breaks here at once instead of silently reading None.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional

from pydantic import BaseModel, ConfigDict, ValidationError, create_model
from pydantic.alias_generators import to_camel

from ragbatch.core import ConfigError
from ragbatch.report._models import DatasetInfo, Report, RowResult

ROW_FIELDS = (
    "id",
    "status",
    "retrieval",
    "generation",
    "diagnosis",
    "confidence",
    "route",
    "expected",
    "claim_summary",
    "trace_id",
    "first_failing_step",
    "first_failing_step_match",
    "steps",
)


class _View(BaseModel):
    model_config = ConfigDict(
        frozen=True, extra="ignore", alias_generator=to_camel, populate_by_name=True
    )


def _optional(model: type[BaseModel], names: tuple[str, ...]) -> dict[str, Any]:
    return {name: (Optional[model.model_fields[name].annotation], None) for name in names}  # noqa: UP045  # a runtime type


RowView: type[BaseModel] = create_model(
    "RowView", __base__=_View, **_optional(RowResult, ROW_FIELDS)
)
DatasetView: type[BaseModel] = create_model(
    "DatasetView", __base__=_View, **_optional(DatasetInfo, ("name", "sha256"))
)
ReportView: type[BaseModel] = create_model(
    "ReportView",
    __base__=_View,
    rows=(list[dict[str, Any]], []),
    dataset=(Optional[DatasetView], None),  # noqa: UP045  # a runtime type
    **_optional(Report, ("report_version",)),
)


def row_view(raw: Mapping[str, Any]) -> Any:
    """One report row's fields (a :data:`RowView`); a field of the wrong type is a
    ConfigError naming the row and the field."""
    try:
        return RowView.model_validate(raw)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise ConfigError(
            f"row {raw.get('id', '?')}: {where}: {first['msg']} (was the report produced by "
            "ragbatch run?)"
        ) from None


def report_view(raw: Mapping[str, Any]) -> Any:
    """A report's rows (raw), version and dataset block (a :data:`ReportView`)."""
    try:
        return ReportView.model_validate(raw)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise ConfigError(f"report: {where}: {first['msg']}") from None
