"""Versioned price snapshots and the cost of token usage (pure: parses bytes, reads no file).

A snapshot maps model names (exact, or a glob like ``jev-*``) to USD per million input and
output tokens. Cost per call = (in * inPrice + out * outPrice) / 1,000,000 with the prices of
the model that *answered*. Usage that cannot be priced makes the cost unavailable, with a
reason; it is never silently 0.
"""

from __future__ import annotations

import datetime
import fnmatch
import hashlib
import math
import re
from collections.abc import Iterable
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

from ragbatch.core._errors import PricingError

PER_MILLION = 1_000_000
_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


class _Model(BaseModel):
    model_config = ConfigDict(
        frozen=True, extra="forbid", strict=True, alias_generator=to_camel, populate_by_name=True
    )


class ModelPrice(_Model):
    input_per_million: Annotated[float, Field(ge=0.0, allow_inf_nan=False)]
    output_per_million: Annotated[float, Field(ge=0.0, allow_inf_nan=False)]


class PricingSnapshot(_Model):
    version: Annotated[str, Field(min_length=1)]
    effective_date: str
    currency: Annotated[str, Field(min_length=1)]
    source: str | None = None
    models: dict[str, ModelPrice]
    sha256: str = ""

    @field_validator("effective_date")
    @classmethod
    def _real_date(cls, value: str) -> str:
        # A typo'd date (2026-13-45) would otherwise travel into every report unchecked.
        reason = "" if _ISO_DATE.fullmatch(value) else "write it as YYYY-MM-DD"
        if not reason:
            try:
                datetime.date.fromisoformat(value)
            except ValueError as exc:
                reason = str(exc)
        if reason:
            raise PydanticCustomError(
                "date",
                "'{value}' is not a real date ({reason})",
                {"value": value, "reason": reason},
            )
        return value

    def price_for(self, model: str) -> ModelPrice | None:
        """Exact name first, then the most specific (longest) matching glob."""
        if model in self.models:
            return self.models[model]
        patterns = sorted(
            (
                p
                for p in self.models
                if any(ch in p for ch in "*?[") and fnmatch.fnmatchcase(model, p)
            ),
            key=lambda p: (-len(p), p),
        )
        return self.models[patterns[0]] if patterns else None


def parse_pricing(data: bytes, source: str) -> PricingSnapshot:
    """Parse and check a snapshot file's bytes; ``source`` names it in errors."""
    try:
        snapshot = PricingSnapshot.model_validate_json(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "file"
        raise PricingError(
            f"{source}: malformed pricing snapshot: {where}: {first['msg']}"
        ) from None
    if not snapshot.models:
        raise PricingError(f"{source}: pricing snapshot lists no models")
    digest = hashlib.sha256(data).hexdigest()
    return snapshot.model_copy(update={"sha256": digest})


class Cost(_Model):
    """Money spent, per model that answered; ``usd`` is None when some usage had no price."""

    available: bool
    currency: str
    usd: float | None = None
    by_model: dict[str, float] = Field(default_factory=dict)
    reason: str | None = None


def total_cost(snapshot: PricingSnapshot, calls: Iterable[tuple[str, int, int]]) -> Cost:
    """Cost of (model, inputTokens, outputTokens) calls.

    Cost is linear in tokens, so tokens are summed per model first (exact integers) and
    priced once: the result does not depend on call order and carries no summation error.
    """
    tokens: dict[str, list[int]] = {}
    for model, tokens_in, tokens_out in calls:
        totals = tokens.setdefault(model, [0, 0])
        totals[0] += tokens_in
        totals[1] += tokens_out
    unpriced = sorted(m for m in tokens if snapshot.price_for(m) is None)
    if unpriced:
        names = ", ".join(repr(m) for m in unpriced)
        return Cost(
            available=False,
            currency=snapshot.currency,
            reason=f"no price for model {names} in pricing snapshot {snapshot.version}",
        )
    by_model: dict[str, float] = {}
    for model in sorted(tokens):
        price = snapshot.price_for(model)
        assert price is not None
        tokens_in, tokens_out = tokens[model]
        by_model[model] = (
            tokens_in * price.input_per_million + tokens_out * price.output_per_million
        ) / PER_MILLION
    return Cost(
        available=True,
        currency=snapshot.currency,
        usd=math.fsum(by_model.values()),
        by_model=by_model,
    )
