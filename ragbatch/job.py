"""One evaluation job end to end: files in, report bytes out (does I/O; no CLI concerns).

Reads the pricing snapshot, streams the dataset through :func:`ragbatch.runner.run_batch`,
summarizes, and writes the report and the optional run record. The CLI and the Python API
both call :func:`run_job`.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import anyio
import orjson

from ragbatch.budget import BudgetedProvider, SpendLimit
from ragbatch.cache import CachedProvider, CacheMode, ReplyCache
from ragbatch.calibrate_policy import load_policy, thresholds_of
from ragbatch.claims import EXTRACTORS, Scope
from ragbatch.errors import ConfigError, PricingError, RagbatchError
from ragbatch.importers import open_dataset
from ragbatch.outcome import RowOutcome
from ragbatch.partial import shard_of, write_partial
from ragbatch.policy import Thresholds
from ragbatch.pricing import PricingSnapshot, parse_pricing, total_cost
from ragbatch.progress import Progress, Snapshot, count_lines
from ragbatch.providers.base import Provider
from ragbatch.providers.baseline import BaselineJudge, RecordedBaseline
from ragbatch.providers.jev import (
    DEFAULT_BASE_URL,
    DEFAULT_MODEL,
    MODEL_ALIASES,
    JevProvider,
    JevSettings,
    OfflineJev,
)
from ragbatch.providers.lexical import LexicalBaseline
from ragbatch.providers.llm_judge import API_KEY_ENV, LlmJudge
from ragbatch.providers.mock import MockProvider
from ragbatch.ranking import DEFAULT_KS
from ragbatch.ratelimit import RateLimiter
from ragbatch.report import Report, report_bytes
from ragbatch.rows_out import RowsWriter
from ragbatch.runner import ClaimConfig, RunConfig, run_indexed
from ragbatch.schema import Row
from ragbatch.summarize import RunInfo, summarize

DEFAULT_DATASET = Path("datasets/rag-fixture.jsonl")
DEFAULT_OUT = Path("reports/report.json")
DEFAULT_PRICING = Path("pricing/typesafe-2026-12.json")
DEFAULT_CACHE = Path("cache")


class RowSource(Protocol):
    """Rows to evaluate; ``name``, ``rows`` and ``sha256`` are known once iterated."""

    name: str
    rows: int

    @property
    def sha256(self) -> str: ...

    def __iter__(self) -> Iterator[Row]: ...


@dataclass(frozen=True)
class JobConfig:
    dataset: Path = DEFAULT_DATASET
    out: Path | None = DEFAULT_OUT
    provider: str = "mock"
    model: str | None = None
    concurrency: int = 32
    thresholds: Thresholds = field(default_factory=Thresholds)
    pricing: Path = DEFAULT_PRICING
    baseline: str = "recorded"
    ignore_unknown_fields: bool = False
    run_record: Path | None = None
    # live Jev
    api_key: str | None = field(default=None, repr=False)
    base_url: str = DEFAULT_BASE_URL
    cache_dir: Path = DEFAULT_CACHE
    cache_mode: CacheMode = "use"
    attempt_timeout_s: float = 30.0
    row_deadline_s: float = 300.0
    max_retries: int = 4
    backoff_initial_s: float = 0.5
    backoff_max_s: float = 5.0
    max_rps: float | None = None
    max_tokens_per_s: float | None = None
    adaptive: bool = True
    max_error_rate: float | None = None
    error_budget_rows: int = 20
    # claim mode
    groundedness: str = "basic"
    claim_evidence: str = "cited"
    claim_extractor: str = "provided"
    slice_by: tuple[str, ...] = ()
    ks: tuple[int, ...] = DEFAULT_KS
    # sharding: evaluate only shard K of N and write a partial result instead of a report
    judge_base_url: str = "https://api.openai.com"
    judge_api_key: str | None = field(default=None, repr=False)
    judge_model: str = "gpt-4o-mini"
    policy: Path | None = None  # a calibrated policy file: its thresholds win
    max_cost: float | None = None
    rows_out: Path | None = None
    progress: str = "none"  # auto | rich | plain | none
    progress_interval: float = 5.0
    format: str = "jsonl"  # jsonl | ragas | csv | golden-yaml
    mapping: str | None = None  # csv: field=column,...
    outputs: Path | None = None  # golden-yaml: the JSONL of system outputs
    # rows from somewhere else than a file (the Python API)
    source: RowSource | None = field(default=None, compare=False)
    shard: tuple[int, int] | None = None
    partial_out: Path | None = None


@dataclass(frozen=True, repr=False)
class JobResult:
    report: Report
    report_bytes: bytes
    wall_s: float
    rows_per_s: float
    record: dict[str, Any]

    def __repr__(self) -> str:
        # Short on purpose: asyncio may repr the finished task's result, report included.
        return f"JobResult(rows={self.report.dataset.rows}, wall_s={self.wall_s:.3f})"


def load_pricing(path: Path) -> PricingSnapshot:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise PricingError(
            f"cannot read pricing snapshot {path}: {exc.strerror or exc} (pass --pricing FILE)"
        ) from None
    return parse_pricing(data, str(path))


def make_provider(
    config: JobConfig, pricing: PricingSnapshot
) -> tuple[Provider, CachedProvider | None, list[str]]:
    """The provider for the run: budget-limited, and behind the reply cache for live Jev."""
    limit = SpendLimit(config.max_cost, pricing) if config.max_cost is not None else None
    if config.provider == "mock":
        provider: Provider = MockProvider(config.model) if config.model else MockProvider()
        return (BudgetedProvider(provider, limit) if limit else provider), None, []
    if config.provider != "jev":
        raise ConfigError(f"unknown provider {config.provider!r}; choose mock or jev")
    model = config.model or DEFAULT_MODEL
    warnings = []
    if model in MODEL_ALIASES and config.cache_mode != "off":
        warnings.append(
            f"model {model!r} is an alias: the release behind it can change between runs, so "
            "a cache keyed on it can mix releases; pin a release (e.g. --model jev-1.13.0) "
            "for reproducible backfills"
        )
    settings = JevSettings(
        api_key=config.api_key,
        base_url=config.base_url,
        model=model,
        attempt_timeout_s=config.attempt_timeout_s,
        row_deadline_s=config.row_deadline_s,
        max_retries=config.max_retries,
        backoff_initial_s=config.backoff_initial_s,
        backoff_max_s=config.backoff_max_s,
    )
    limiter = RateLimiter(
        config.concurrency,
        max_rps=config.max_rps,
        max_tokens_per_s=config.max_tokens_per_s,
        adaptive=config.adaptive,
    )
    inner: Provider = (
        OfflineJev(model) if config.cache_mode == "offline" else JevProvider(settings, limiter)
    )
    cache = None if config.cache_mode == "off" else ReplyCache(config.cache_dir)
    if limit is not None:
        inner = BudgetedProvider(inner, limit)
    cached = CachedProvider(inner, cache, config.cache_mode)
    return cached, cached, warnings


def load_thresholds(config: JobConfig) -> tuple[Thresholds, str | None]:
    """The thresholds of --policy (and its version), else the configured ones."""
    if config.policy is None:
        return config.thresholds, None
    try:
        data = config.policy.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read policy {config.policy}: {exc.strerror or exc}") from None
    policy = load_policy(data, str(config.policy))
    per = tuple(
        (name, pair[0], pair[1])
        for name, pair in sorted(thresholds_of(policy).items())
        if pair != (policy.fail_threshold, policy.pass_threshold)
    )
    return Thresholds(policy.fail_threshold, policy.pass_threshold, per), policy.version


def make_claims(config: JobConfig) -> ClaimConfig | None:
    """Claim mode settings, or None for basic (whole-answer) groundedness."""
    if config.groundedness == "basic":
        return None
    if config.groundedness != "claims":
        raise ConfigError(
            f"unknown groundedness mode {config.groundedness!r}; choose basic or claims"
        )
    extractor = EXTRACTORS.get(config.claim_extractor)
    if extractor is None:
        raise ConfigError(
            f"unknown claim extractor {config.claim_extractor!r}; choose "
            + " or ".join(sorted(EXTRACTORS))
        )
    if config.claim_evidence not in ("cited", "context"):
        raise ConfigError(
            f"unknown claim evidence scope {config.claim_evidence!r}; choose cited or context"
        )
    scope: Scope = "cited" if config.claim_evidence == "cited" else "context"
    return ClaimConfig(extractor, scope)


def make_baseline(config: JobConfig) -> BaselineJudge:
    """The fallback judge: recorded verdicts, the lexical check, or an LLM judge."""
    if config.baseline == "recorded":
        return RecordedBaseline()
    if config.baseline == "lexical":
        return LexicalBaseline()
    if config.baseline == "llm":
        if not config.judge_api_key and config.cache_mode != "offline":
            raise ConfigError(f"--baseline llm needs a key: set {API_KEY_ENV}")
        limiter = RateLimiter(config.concurrency, max_rps=config.max_rps)
        cache = None if config.cache_mode == "off" else ReplyCache(config.cache_dir)
        return LlmJudge(
            config.judge_base_url,
            config.judge_api_key or "",
            config.judge_model,
            cache,
            limiter,
            timeout_s=config.attempt_timeout_s,
            max_retries=config.max_retries,
            backoff_initial_s=config.backoff_initial_s,
            backoff_max_s=config.backoff_max_s,
        )
    raise ConfigError(f"unknown baseline {config.baseline!r}; choose recorded, lexical or llm")


def _unwrap(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The first real error inside (possibly nested) task-group exception groups."""
    first: BaseException = group
    while isinstance(first, BaseExceptionGroup):
        first = first.exceptions[0]
    return first


def watch(
    config: JobConfig, pricing: PricingSnapshot, cached: CachedProvider | None
) -> list[Progress | RowsWriter]:
    """The observers of finished rows: the progress display and the --rows-out writer."""
    watchers: list[Progress | RowsWriter] = []
    if config.progress != "none":
        live = Snapshot()
        if cached is not None:
            stats = cached.stats
            live.cache_hits = lambda: stats.hits
            live.cache_lookups = lambda: stats.hits + stats.misses
            inner = (
                cached.inner.inner if isinstance(cached.inner, BudgetedProvider) else cached.inner
            )
            if isinstance(inner, JevProvider):
                limiter, counts = inner.limiter, inner.retries
                live.in_flight = lambda: limiter.stats.in_flight
                live.concurrency = lambda: limiter.limit
                live.retries = lambda: sum(counts.values())
                live.throttled = lambda: limiter.stats.throttled
        total = count_lines(str(config.dataset)) if config.source is None else None
        watchers.append(
            Progress(total, pricing, live, mode=config.progress, interval=config.progress_interval)
        )
    if config.rows_out is not None:
        watchers.append(RowsWriter(config.rows_out, config.ks))
    return watchers


def _ignore(message: str) -> None:
    return None


async def evaluate_async(config: JobConfig, warn: Callable[[str], None] = _ignore) -> JobResult:
    """Run the job inside an existing event loop; ``warn`` hears warnings as they arise."""
    if config.concurrency < 1:
        raise ConfigError(f"--concurrency must be at least 1, got {config.concurrency}")
    if config.shard is not None and config.partial_out is None:
        raise ConfigError("--shard needs --partial-out PATH (merge partials with ragbatch merge)")
    pricing = load_pricing(config.pricing)
    thresholds, policy_version = load_thresholds(config)
    config = replace(config, thresholds=thresholds)
    claims = make_claims(config)
    baseline = make_baseline(config)
    reader = config.source or open_dataset(
        config.dataset,
        config.format,
        mapping=config.mapping,
        outputs=config.outputs,
        ignore_unknown_fields=config.ignore_unknown_fields,
    )
    provider, cached, warnings = make_provider(config, pricing)  # last: it holds connections
    for warning in warnings:
        warn(warning)
    started = time.perf_counter()
    try:
        run_config = RunConfig(
            config.concurrency,
            config.thresholds,
            max_error_rate=config.max_error_rate,
            error_budget_rows=config.error_budget_rows,
            claims=claims,
        )
        pairs = (
            (index, row)
            for index, row in enumerate(reader)
            if config.shard is None or shard_of(row.id, config.shard[1]) == config.shard[0]
        )
        watchers = watch(config, pricing, cached)

        def on_row(outcome: RowOutcome) -> None:
            for watcher in watchers:
                watcher.on_row(outcome)

        try:
            outcomes = await run_indexed(pairs, provider, baseline, run_config, on_row)
        finally:
            for watcher in watchers:
                watcher.close()
    except BaseExceptionGroup as group:
        error = _unwrap(group)
        if isinstance(error, RagbatchError):
            raise error from None
        raise
    finally:
        await provider.aclose()
        await baseline.aclose()
    wall = time.perf_counter() - started
    info = RunInfo(
        dataset_name=reader.name,
        dataset_sha256=reader.sha256,
        provider=provider.name,
        requested_model=provider.model,
        baseline=baseline.name,
        thresholds=config.thresholds,
        pricing=pricing,
        claims=(claims.extractor.name, claims.scope) if claims else None,
        ks=config.ks,
        slice_by=config.slice_by,
        policy_version=policy_version,
    )
    report = summarize(outcomes, info)
    data = report_bytes(report)
    if config.shard is not None and config.partial_out is not None:
        write_partial(config.partial_out, config.shard, reader.rows, info, outcomes)
    elif config.out is not None:
        write_bytes(config.out, data)
    rate = len(outcomes) / wall if wall > 0 else 0.0
    record = run_record(outcomes, wall, rate, provider, cached, pricing)
    if cached is not None:
        for warning in cached.warnings:
            warn(warning)
    if config.run_record is not None:
        write_bytes(config.run_record, orjson.dumps(record, option=orjson.OPT_INDENT_2) + b"\n")
    return JobResult(report, data, wall, rate, record)


def run_record(
    outcomes: list[RowOutcome],
    wall: float,
    rate: float,
    provider: Provider,
    cached: CachedProvider | None,
    pricing: PricingSnapshot,
) -> dict[str, Any]:
    """What happened in this run (timings, retries, cache hits): kept out of the report."""
    calls = []
    retries: Counter[str] = Counter()
    for o in outcomes:
        reply, failure = o.jev.reply, o.jev.failure
        entry: dict[str, Any] = {"id": o.row.id}
        if reply is not None:
            retries.update(reply.retries)
            entry.update(
                cached=reply.cached,
                attempts=reply.attempts,
                retries=reply.retries,
                latencyMs=reply.latency_ms,
                wallMs=reply.wall_ms,
                model=reply.model,
                requestId=reply.request_id,
            )
        elif failure is not None:
            retries.update(failure.retries)
            entry.update(
                failed=failure.kind,
                message=failure.message,
                retries=failure.retries,
                wallMs=o.jev.latency_ms,
            )
        calls.append(entry)
    record: dict[str, Any] = {
        "rows": len(outcomes),
        "wallSeconds": wall,
        "rowsPerSecond": rate,
        "retriesByStatus": dict(sorted(retries.items())),
    }
    if cached is not None:
        stats = cached.stats
        saved = total_cost(pricing, ((m, t, 0) for m, t in stats.saved_models.items()))
        record["cache"] = {
            "hits": stats.hits,
            "misses": stats.misses,
            "writes": stats.writes,
            "corrupt": stats.corrupt,
            "deduplicated": stats.deduplicated,
            "savedInputTokens": stats.saved_input_tokens,
            "savedUsd": saved.usd,
        }
        inner = cached.inner
        if isinstance(inner, JevProvider):
            limiter = inner.limiter.stats
            record["rateControl"] = {
                "throttled": limiter.throttled,
                "peakInFlight": limiter.peak_in_flight,
                "lowestConcurrency": limiter.lowest_limit,
                "finalConcurrency": limiter.current_limit,
            }
    record["calls"] = calls
    return record


def run_job(config: JobConfig, warn: Callable[[str], None] = _ignore) -> JobResult:
    """Run the job in a fresh event loop (the CLI's entry)."""
    return anyio.run(evaluate_async, config, warn)


def write_bytes(path: Path, data: bytes) -> None:
    """Write atomically: a reader never sees half a report."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    tmp.replace(path)
