"""The options of ``ragbatch run``, shared by the CLI and the Python API (no I/O).

:class:`RunOptions` has one field per ``ragbatch run`` parameter, by the same snake_case
name and with the same default: the CLI builds it from every one of its parameters (a
parameter missing here breaks the command at once) and ``ragbatch.evaluate(data,
**options)`` accepts exactly these names (``dataset`` excepted: that is ``data``). A test
checks names, defaults and environment variables against the typer command itself.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path

from ragbatch.core.errors import ConfigError
from ragbatch.core.policy import Thresholds, routing_of
from ragbatch.core.questions import MAX_REQUEST_TOKENS, MAX_STATE_QUESTION_TOKENS
from ragbatch.metrics.ranking import DEFAULT_KS
from ragbatch.providers.cache import CacheMode
from ragbatch.providers.jev import DEFAULT_BASE_URL
from ragbatch.run.config import (
    DEFAULT_CACHE,
    DEFAULT_DATASET,
    DEFAULT_OUT,
    DEFAULT_PRICING,
    JobConfig,
)
from ragbatch.run.shards import parse_shard

# Options the CLI also reads from the environment (the API does the same when not given).
ENVIRONMENT: dict[str, str] = {
    "model": "TYPESAFE_DEFAULT_MODEL",
    "base_url": "TYPESAFE_BASE_URL",
    "api_key": "TYPESAFE_API_KEY",
    "judge_base_url": "RAGBATCH_JUDGE_BASE_URL",
    "judge_model": "RAGBATCH_JUDGE_MODEL",
    "judge_api_key": "RAGBATCH_JUDGE_API_KEY",
}


@dataclass(frozen=True)
class RunOptions:
    """``ragbatch run``'s parameters, as given (see ``ragbatch run --help`` for each)."""

    dataset: Path = DEFAULT_DATASET
    out: Path | None = DEFAULT_OUT
    format: str = "jsonl"
    mapping: str | None = None
    outputs: Path | None = None
    provider: str = "mock"
    model: str | None = None
    base_url: str = DEFAULT_BASE_URL
    allow_insecure_http: bool = False
    api_key: str | None = None
    cache_dir: Path = DEFAULT_CACHE
    offline: bool = False
    refresh: bool = False
    no_cache: bool = False
    timeout: float = 30.0
    row_deadline: float = 300.0
    max_retries: int = 4
    max_rps: float | None = None
    max_tokens_per_s: float | None = None
    max_request_tokens: int = MAX_REQUEST_TOKENS
    max_state_question_tokens: int = MAX_STATE_QUESTION_TOKENS
    adaptive: bool = True
    max_error_rate: float | None = None
    error_budget_rows: int = 20
    concurrency: int = 32
    fail_threshold: float | None = None  # None: the default (0.2), or the --policy's
    pass_threshold: float | None = None  # None: the default (0.8), or the --policy's
    routing: str | None = None
    pricing: Path = DEFAULT_PRICING
    baseline: str = "recorded"
    judge_base_url: str = "https://api.openai.com"
    judge_model: str = "gpt-4o-mini"
    judge_api_key: str | None = None
    policy: Path | None = None
    markdown: Path | None = None
    html: Path | None = None
    ignore_unknown_fields: bool = False
    groundedness: str = "basic"
    claim_evidence: str = "cited"
    claim_extractor: str = "provided"
    slice_by: list[str] | None = None
    k: list[int] | None = None
    rows_out: Path | None = None
    max_report_rows: int | None = 10_000
    progress_interval: float = 5.0
    max_cost: float | None = None
    shard: str | None = None
    partial_out: Path | None = None
    workers: int = 1
    run_record: Path | None = None
    quiet: bool = False
    dask: str | None = None

    def __repr__(self) -> str:  # keys never appear, not even in a traceback
        return "RunOptions(...)"


OPTION_NAMES: tuple[str, ...] = tuple(f.name for f in fields(RunOptions))
PATH_OPTIONS = frozenset(f.name for f in fields(RunOptions) if "Path" in str(f.type))


def cache_mode(*, offline: bool, refresh: bool, no_cache: bool) -> CacheMode:
    chosen = [name for name, on in (("--offline", offline), ("--refresh", refresh),
                                    ("--no-cache", no_cache)) if on]  # fmt: skip
    if len(chosen) > 1:
        raise ConfigError(f"{' and '.join(chosen)} cannot be used together")
    if offline:
        return "offline"
    if refresh:
        return "refresh"
    return "off" if no_cache else "use"


def job_config(o: RunOptions) -> JobConfig:
    """The job the options describe (checked: conflicting options are a ConfigError)."""
    if o.routing is not None and o.policy is not None:
        raise ConfigError(
            "--routing and --policy cannot be used together: the policy file "
            "names its own routing (see `ragbatch calibrate --routing`)"
        )
    given = [flag for flag, value in (("--fail-threshold", o.fail_threshold),
             ("--pass-threshold", o.pass_threshold)) if value is not None]  # fmt: skip
    if given and o.policy is not None:
        raise ConfigError(
            f"{', '.join(given)} and --policy cannot be used together: the policy file "
            "sets its own thresholds (refit them with `ragbatch calibrate`)"
        )
    if o.workers > 1 and o.shard is not None:
        raise ConfigError("--workers and --shard cannot be used together")
    default = Thresholds()
    fail_at = default.fail if o.fail_threshold is None else o.fail_threshold
    pass_at = default.pass_ if o.pass_threshold is None else o.pass_threshold
    return JobConfig(
        base_url=o.base_url,
        allow_insecure_http=o.allow_insecure_http,
        api_key=o.api_key,
        cache_dir=o.cache_dir,
        cache_mode=cache_mode(offline=o.offline, refresh=o.refresh, no_cache=o.no_cache),
        attempt_timeout_s=o.timeout,
        row_deadline_s=o.row_deadline,
        max_retries=o.max_retries,
        max_rps=o.max_rps,
        max_tokens_per_s=o.max_tokens_per_s,
        max_request_tokens=o.max_request_tokens,
        max_state_question_tokens=o.max_state_question_tokens,
        adaptive=o.adaptive,
        max_error_rate=o.max_error_rate,
        error_budget_rows=o.error_budget_rows,
        groundedness=o.groundedness,
        claim_evidence=o.claim_evidence,
        claim_extractor=o.claim_extractor,
        slice_by=tuple(o.slice_by or ()),
        shard=parse_shard(o.shard) if o.shard else None,
        partial_out=o.partial_out,
        max_cost=o.max_cost,
        format=o.format,
        mapping=o.mapping,
        outputs=o.outputs,
        policy=o.policy,
        judge_base_url=o.judge_base_url,
        judge_model=o.judge_model,
        judge_api_key=o.judge_api_key,
        rows_out=o.rows_out,
        max_report_rows=o.max_report_rows,
        progress="none" if o.quiet else "auto",
        progress_interval=o.progress_interval,
        ks=tuple(sorted(set(o.k))) if o.k else DEFAULT_KS,
        dataset=o.dataset,
        out=o.out,
        provider=o.provider,
        model=o.model,
        concurrency=o.concurrency,
        thresholds=Thresholds(fail_at, pass_at, routing=routing_of(o.routing)),
        pricing=o.pricing,
        baseline=o.baseline,
        ignore_unknown_fields=o.ignore_unknown_fields,
        run_record=o.run_record,
    )
