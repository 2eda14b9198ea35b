"""The policy file ``ragbatch calibrate`` writes and ``ragbatch run --policy`` reads (pure).

``version`` is ``"sha256:<hex>"`` of the canonical JSON (sorted keys, no whitespace) of
every other field, so a policy names exactly what it contains and a hand-edited file is
rejected on load rather than silently used. Bytes in, bytes out: reading and writing the
file is the CLI's job.

``formatVersion`` 2 (this module) states the guarantee as its target with the observed
figures as estimates, and records tie blocks; a format-1 file with a guarantee is refused on
load with a request to regenerate it (its guarantee named an upper bound that was not one).
Files from before the guarantee existed (no ``guarantee``) still load.
"""

from __future__ import annotations

import hashlib
from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, ValidationError, model_validator
from pydantic.alias_generators import to_camel

from ragbatch.calibrate._rules import JUDGMENTS, Pair
from ragbatch.core import ConfigError, Guarantee, Routing

KIND: Literal["ragbatch-policy"] = "ragbatch-policy"
FORMAT_VERSION = 2


class _Model(BaseModel):
    """Frozen, camelCase on the wire, unknown fields rejected (a typo is an error)."""

    model_config = ConfigDict(
        frozen=True, extra="forbid", alias_generator=to_camel, populate_by_name=True
    )


class ThresholdPair(_Model):
    fail_threshold: float
    pass_threshold: float

    @model_validator(mode="after")
    def _ordered(self) -> ThresholdPair:
        if not 0.0 <= self.fail_threshold < self.pass_threshold <= 1.0:
            raise ValueError("thresholds must satisfy 0 <= failThreshold < passThreshold <= 1")
        return self


class FittedOn(_Model):
    """The data a policy was fitted on."""

    dataset_sha256: str | None = None
    dataset_name: str | None = None
    rows: int  # every row of the report
    labelled_rows: int  # successful rows with an expected diagnosis: what the search saw
    report_version: str | None = None
    rows_sha256: str  # sha256 of [id, expected, signals] of the labelled rows, in order
    # (a trace's with its layout: [step, judgments…] per step read)
    labelled_traces: int | None = None  # of labelled_rows, multi-step traces (absent: none)


class Fit(_Model):
    """Coverage and diagnosis risk of the automatic rows, with the risk's upper bound."""

    coverage: float
    risk: float
    risk_upper_bound: float
    auto_rows: int
    errors: int
    rows: int


class HeldOut(Fit):
    """Cross-validated :class:`Fit`: counts pooled over the held-out folds.

    An estimate of refitting on part of the rows, not the certificate: ``note`` says why
    it may disagree with the guarantee when it does.
    """

    folds: int
    seed: int
    meets_target: bool
    note: str | None = None


class TieBlock(_Model):
    """Rows whose answer on one judgment is exactly 0 or 1: no threshold separates them."""

    judgment: str
    value: float  # 0.0 or 1.0
    rows: int
    errors: int  # rows whose label says the opposite of the answer
    error_rate: float


class JudgmentFit(_Model):
    """One judgment's own automatic decisions against labels implied by the diagnosis."""

    labelled_rows: int
    coverage: float
    risk: float
    risk_upper_bound: float
    auroc: float | None = None  # None when the implied labels hold one class only


class PolicyFile(_Model):
    """A fitted, versioned threshold policy; judgments absent from ``perJudgment`` use the
    global pair."""

    version: str
    kind: Literal["ragbatch-policy"] = KIND
    format_version: int | None = None  # absent in files of format 1
    routing: Routing = "showcase"  # absent in files written before routings existed
    fail_threshold: float
    pass_threshold: float
    per_judgment: dict[str, ThresholdPair]
    target_risk: float
    confidence: float
    method: Literal["clopper-pearson"] | None = None  # format 1 only: the bound's name
    fitted_on: FittedOn
    in_sample: Fit
    held_out: HeldOut
    judgments: dict[str, JudgmentFit]
    guarantee: Guarantee | None = None  # absent in files written before Learn-then-Test
    tie_blocks: list[TieBlock] | None = None  # format 2: blocks above the target, if any

    @model_validator(mode="after")
    def _valid(self) -> PolicyFile:
        ThresholdPair(fail_threshold=self.fail_threshold, pass_threshold=self.pass_threshold)
        unknown = sorted(set(self.per_judgment) - set(JUDGMENTS))
        if unknown:
            raise ValueError(f"unknown judgments {unknown}; known: {list(JUDGMENTS)}")
        return self


def _content(data: dict[str, Any]) -> bytes:
    body = {k: v for k, v in data.items() if k != "version"}
    # Files written before these fields existed hash without them, and still verify.
    if body.get("routing") == "showcase":
        del body["routing"]
    for optional in ("guarantee", "formatVersion", "method", "tieBlocks"):
        if body.get(optional) is None:
            body.pop(optional, None)
    body["fittedOn"] = _without_traces(body["fittedOn"])
    return orjson.dumps(body, option=orjson.OPT_SORT_KEYS)


def _without_traces(fitted_on: dict[str, Any]) -> dict[str, Any]:
    """``fittedOn`` without ``labelledTraces`` when there were none: a policy fitted on rows
    alone has the bytes (and version) it had before traces could be calibrated."""
    if fitted_on.get("labelledTraces") is not None:
        return fitted_on
    return {k: v for k, v in fitted_on.items() if k != "labelledTraces"}


def _digest(data: dict[str, Any]) -> str:
    return "sha256:" + hashlib.sha256(_content(data)).hexdigest()


def with_version(**fields: Any) -> PolicyFile:
    """Build a :class:`PolicyFile` from its fields (snake_case), stamping its version."""
    draft = PolicyFile(version="sha256:", **fields)
    data = draft.model_dump(mode="json", by_alias=True)
    return draft.model_copy(update={"version": _digest(data)})


def policy_bytes(policy: PolicyFile) -> bytes:
    """The policy as JSON: field order of the model, 2-space indent, trailing newline."""
    data = policy.model_dump(mode="json", by_alias=True)
    for optional in ("method", "tieBlocks"):
        if data.get(optional) is None:
            data.pop(optional, None)
    data["fittedOn"] = _without_traces(data["fittedOn"])
    return orjson.dumps(data, option=orjson.OPT_INDENT_2) + b"\n"


def load_policy(data: bytes, source: str) -> PolicyFile:
    """Parse and verify a policy file; ``source`` names it in error messages.

    Raises :class:`ConfigError` when the bytes are not a policy file or when the content no
    longer matches its version (the file was edited after ``ragbatch calibrate`` wrote it).
    """
    redo = "regenerate it with `ragbatch calibrate` instead of editing it"
    try:
        raw = orjson.loads(data)
    except orjson.JSONDecodeError as e:
        raise ConfigError(f"{source}: not a policy file (invalid JSON: {e}); {redo}") from None
    if not isinstance(raw, dict) or raw.get("kind") != KIND:
        raise ConfigError(f'{source}: not a policy file (no "kind": "{KIND}"); {redo}')
    if raw.get("guarantee") is not None and raw.get("formatVersion") is None:
        raise ConfigError(
            f"{source}: policy file of format 1, whose guarantee printed an upper bound that "
            f"was not one; {redo} (format {FORMAT_VERSION})"
        )
    try:
        policy = PolicyFile.model_validate(raw)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "(top level)"
        raise ConfigError(
            f"{source}: malformed policy file at {where}: {first['msg']}; {redo}"
        ) from None
    actual = _digest(policy.model_dump(mode="json", by_alias=True))
    if policy.version != actual:
        raise ConfigError(
            f"{source}: policy content does not match its version {policy.version} (content "
            f"hashes to {actual}): the file was modified after it was fitted; {redo}"
        )
    return policy


def thresholds_of(policy: PolicyFile) -> dict[str, Pair]:
    """The (fail, pass) pair of every judgment: its own where fitted, else the global one."""
    pairs: dict[str, Pair] = {}
    for name in JUDGMENTS:
        own = policy.per_judgment.get(name)
        pairs[name] = (
            (own.fail_threshold, own.pass_threshold)
            if own is not None
            else (policy.fail_threshold, policy.pass_threshold)
        )
    return pairs
