"""Builds the parts of a run from its checked options (:class:`Checked` -> :class:`Parts`; I/O).

:func:`build_parts` makes every part from what :func:`~ragbatch.run._preflight.preflight` checked
and read (pricing, thresholds): claim mode, the baseline judge, the row reader, the shard a part
evaluates and the provider chain. The chain for live Jev is
``CachedProvider(BudgetedProvider(JevProvider))``: cache hits are free and answered first, the
cost limit sees only calls that will be paid for; :func:`~ragbatch.core._provider.innermost`
finds the live client at its end.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ragbatch.core import (
    EXTRACTORS,
    AsyncClaimExtractor,
    BaselineJudge,
    ClaimExtractor,
    PricingSnapshot,
    Provider,
    Thresholds,
)
from ragbatch.providers import (
    DEFAULT_MODEL,
    ENDPOINT,
    JevProvider,
    MockProvider,
    OfflineJev,
    RateLimiter,
    RecordedBaseline,
)
from ragbatch.providers.cache import CachedProvider, ReplyCache
from ragbatch.report import RunInfo
from ragbatch.run._budget import BudgetedProvider, SpendLimit
from ragbatch.run._config import RowSource
from ragbatch.run._items import SourceItems, open_source_items
from ragbatch.run._options import RunOptions
from ragbatch.run._preflight import Checked, check_claims, load_pricing, rows_warning, run_model
from ragbatch.run._progress import count_lines
from ragbatch.run._runner import ClaimConfig
from ragbatch.run._shards import Shard

if TYPE_CHECKING:  # loaded only by ``ragbatch estimate`` (start-up)
    from ragbatch.run._estimate import Estimate


def open_cache(o: RunOptions, stack: ExitStack) -> ReplyCache | None:
    """The run's reply cache, closed by ``stack`` unless a part takes it over: none with
    ``--cache off``; read-only with ``--offline`` (a replay never changes a byte of the cache
    directory)."""
    if o.cache.mode == "off":
        return None
    # A lease outlives the longest call its holder can make (then it is taken over).
    cache = ReplyCache(
        o.cache.cache_dir,
        read_only=o.cache.mode == "offline",
        lease_s=o.retry.row_deadline + 30,
    )
    stack.callback(cache.close)
    return cache


def make_provider(checked: Checked, stack: ExitStack) -> tuple[Provider, CachedProvider | None]:
    """The provider for the run: behind the --max-cost limit, and behind the reply cache
    for live Jev."""
    o, max_cost = checked.options, checked.options.limits.max_cost
    per_hour = o.limits.max_cost_per_hour
    cost_limit = (
        SpendLimit(max_cost, checked.pricing, per_hour=per_hour)
        if max_cost is not None or per_hour is not None
        else None
    )
    if o.jev.provider == "mock":
        provider: Provider = MockProvider(o.jev.model) if o.jev.model else MockProvider()
        return (BudgetedProvider(provider, cost_limit) if cost_limit else provider), None
    model = o.jev.model or DEFAULT_MODEL
    inner: Provider = OfflineJev(model)
    if checked.jev is not None:
        limiter = RateLimiter(
            o.rate.concurrency,
            max_rps=o.rate.max_rps,
            max_tokens_per_s=o.rate.max_tokens_per_s,
            adaptive=o.rate.adaptive,
        )
        inner = JevProvider(checked.jev, limiter)
    if cost_limit is not None:
        inner = BudgetedProvider(inner, cost_limit, o.jev.request_limits)
    cache = open_cache(o, stack)
    cached = CachedProvider(inner, cache, o.cache.mode, o.jev.request_limits)
    return cached, cached


def make_claims(o: RunOptions) -> ClaimConfig | None:
    """Claim mode settings (checked by :func:`~ragbatch.run._preflight.check_claims`), or None
    for basic (whole-answer) groundedness."""
    if o.claims.groundedness == "basic":
        return None
    extractor: ClaimExtractor | AsyncClaimExtractor
    if o.claims.claim_extractor == "llm":
        from ragbatch.providers import ChatClient, LlmClaimExtractor

        chat = ChatClient(
            o.judge.judge_base_url,
            o.judge.judge_api_key or "",
            o.judge.judge_model,
            RateLimiter(o.rate.concurrency, max_rps=o.rate.max_rps),
            timeout_s=o.retry.timeout,
            max_retries=o.retry.max_retries,
            allow_insecure_http=o.jev.allow_insecure_http,
            max_response_bytes=o.jev.max_response_bytes,
        )
        extractor = LlmClaimExtractor(chat)
    else:
        extractor = EXTRACTORS[o.claims.claim_extractor]
    return ClaimConfig(extractor, "cited" if o.claims.claim_evidence == "cited" else "context")


def make_baseline(o: RunOptions, stack: ExitStack) -> BaselineJudge:
    """The fallback judge: recorded verdicts, the lexical check, or an LLM judge (its cache is
    closed by ``stack`` unless the parts take it over)."""
    if o.judge.baseline == "recorded":
        return RecordedBaseline()
    if o.judge.baseline == "lexical":
        from ragbatch.providers import LexicalBaseline

        return LexicalBaseline()
    from ragbatch.providers import LlmJudge

    limiter = RateLimiter(o.rate.concurrency, max_rps=o.rate.max_rps)
    return LlmJudge(
        o.judge.judge_base_url,
        o.judge.judge_api_key or "",
        o.judge.judge_model,
        open_cache(o, stack),
        limiter,
        timeout_s=o.retry.timeout,
        max_retries=o.retry.max_retries,
        backoff_initial_s=o.retry.backoff_initial_s,
        backoff_max_s=o.retry.backoff_max_s,
        allow_insecure_http=o.jev.allow_insecure_http,
        max_response_bytes=o.jev.max_response_bytes,
        close_cache=True,
    )


@dataclass(frozen=True)
class Parts:
    """Everything a run is made of, built from its checked options by :func:`build_parts`."""

    options: RunOptions
    pricing: PricingSnapshot
    thresholds: Thresholds  # the flags', or the --policy file's
    claims: ClaimConfig | None
    baseline: BaselineJudge
    reader: RowSource | SourceItems
    shard: Shard | None  # the part of the run this process evaluates (None: all of it)
    provider: Provider
    cached: CachedProvider | None
    info: RunInfo
    total: int | None  # rows the progress display counts to (None: unknown)
    known_rows: int | None  # rows of a JSONL file, known before the run

    async def aclose(self) -> None:
        """Close what holds connections (the provider and the LLM judge close their caches)."""
        await self.provider.aclose()
        await self.baseline.aclose()
        if self.claims is not None and not isinstance(self.claims.extractor, ClaimExtractor):
            await self.claims.extractor.aclose()


def open_reader(o: RunOptions) -> RowSource | SourceItems:
    """The run's rows: the API's in-memory source, else the dataset's rows and traces."""
    i = o.input
    return i.source or SourceItems(open_source_items(i))


def make_shard(o: RunOptions, reader: RowSource | SourceItems) -> Shard | None:
    """The shard ``--shard K/N`` (with ``--partial-out``) names, read by ``reader``."""
    shard, partial = o.scale.shard_of, o.scale.partial_out
    return Shard(*shard, partial, reader) if shard is not None and partial is not None else None


def row_counts(o: RunOptions, shard: Shard | None) -> tuple[int | None, int | None]:
    """(the progress total, the rows of a JSONL file): a file's non-blank lines, unless its
    rows are not its lines (a span export has several lines a row, a JSON array or a YAML
    file any number); a shard counts its own rows."""
    i = o.input
    jsonl = i.format == "jsonl" and i.source is None
    if shard is not None:
        shown = jsonl and o.display.progress != "none"
        return shard.progress_total(i.dataset if shown else None), None
    by_lines = (
        i.source is None
        and i.format not in ("openinference", "langfuse")
        and i.dataset.suffix.lower() not in (".json", ".yaml", ".yml")
    )
    total = count_lines(str(i.dataset)) if by_lines else None
    # a JSONL file's non-blank lines are its rows (any other line fails the run)
    return total, total if i.format == "jsonl" else None


def build_parts(checked: Checked, warn: Callable[[str], None]) -> Parts:
    """Make the parts of a checked run; what holds a cache is closed again if a later part
    cannot be made."""
    o = checked.options
    with ExitStack() as stack:
        claims = make_claims(o)
        reader = open_reader(o)
        shard = make_shard(o, reader)
        total, known_rows = row_counts(o, shard)
        if (warning := rows_warning(o, known_rows)) is not None:
            warn(warning)
        baseline = make_baseline(o, stack)
        provider, cached = make_provider(checked, stack)
        parts = Parts(
            o,
            checked.pricing,
            checked.thresholds,
            claims,
            baseline,
            reader,
            shard,
            provider,
            cached,
            run_info(checked, reader, baseline, provider, claims),
            total,
            known_rows,
        )
        stack.pop_all()  # the parts hold the caches now: Parts.aclose closes them
    return parts


def run_info(
    checked: Checked,
    reader: RowSource | SourceItems,
    baseline: BaselineJudge,
    provider: Provider,
    claims: ClaimConfig | None,
) -> RunInfo:
    """What the report says the run was."""
    o, policy = checked.options, checked.policy
    return RunInfo(
        dataset_name=reader.name,
        dataset_sha256="",  # known once the whole file is read
        provider=provider.name,
        requested_model=provider.model,
        baseline=baseline.name,
        thresholds=checked.thresholds,
        pricing=checked.pricing,
        claims=(claims.extractor.name, claims.scope) if claims else None,
        ks=o.metrics.ks,
        slice_by=tuple(o.metrics.slice_by or ()),
        policy_version=policy.version if policy else None,
        guarantee=policy.guarantee if policy else None,
        max_report_rows=o.output.max_report_rows,
        rows_out=o.output.rows_out is not None,
    )


def estimate_options(o: RunOptions) -> Estimate:
    """``ragbatch estimate``: the calls, tokens and cost of the run ``o`` describes, built
    from the same parts as the run (pricing, claim mode, reader, size limits), sending
    nothing; the reply cache is only read."""
    from ragbatch.run._estimate import estimate_run

    pricing = load_pricing(o.policy.pricing)
    check_claims(o)
    claims = make_claims(o)
    live = o.jev.provider == "jev"
    limits = o.jev.request_limits if live else None
    cache_dir = o.cache.cache_dir
    cache = ReplyCache(cache_dir, read_only=True) if live and cache_dir.exists() else None
    try:
        reader, model = open_reader(o), run_model(o)
        return estimate_run(reader, model, ENDPOINT, pricing, cache, claims, limits, o.audit)
    finally:
        if cache is not None:
            cache.close()
