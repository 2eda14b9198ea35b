"""Builds the parts of a run from its options (options -> :class:`Parts`; I/O).

:func:`build_parts` checks the options against each other and against the data, then makes
every part: pricing, thresholds (a --policy file's win), claim mode, the baseline judge, the
row reader and the provider chain. The chain for live Jev is
``CachedProvider(BudgetedProvider(JevProvider))``: cache hits are free and answered first, the
cost limit sees only calls that will be paid for; :func:`~ragbatch.core._provider.innermost`
finds the live client at its end.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ragbatch.core import (
    EXTRACTORS,
    AsyncClaimExtractor,
    BaselineJudge,
    ClaimExtractor,
    ConfigError,
    PricingError,
    PricingSnapshot,
    Provider,
    Scope,
    Thresholds,
    parse_pricing,
)
from ragbatch.data import open_dataset
from ragbatch.providers import (
    DEFAULT_MODEL,
    ENDPOINT,
    KEY_SOURCE,
    MOCK_MODEL,
    MODEL_ALIASES,
    JevProvider,
    JevSettings,
    MockProvider,
    OfflineJev,
    RateLimiter,
    RecordedBaseline,
    check_base_url,
    clean_key,
)
from ragbatch.providers.cache import CachedProvider, ReplyCache
from ragbatch.report import RunInfo
from ragbatch.run._budget import BudgetedProvider, SpendLimit
from ragbatch.run._config import RowSource
from ragbatch.run._options import RunOptions, check_options
from ragbatch.run._preflight import check_outputs, check_slice_fields, option_warnings
from ragbatch.run._progress import count_lines
from ragbatch.run._runner import ClaimConfig

if TYPE_CHECKING:  # loaded only by a run that needs them (start-up): calibration (policy
    # files), the estimate and shards
    from ragbatch.calibrate import PolicyFile
    from ragbatch.run._estimate import Estimate


def load_pricing(path: Path) -> PricingSnapshot:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise PricingError(
            f"cannot read pricing snapshot {path}: {exc.strerror or exc} (pass --pricing FILE)"
        ) from None
    return parse_pricing(data, str(path))


def spend_limit(o: RunOptions, pricing: PricingSnapshot) -> SpendLimit | None:
    """The ``--max-cost`` limit, refused up front when the snapshot cannot price the model
    (the limit could not be enforced: every call would count as free)."""
    if o.limits.max_cost is None:
        return None
    model = o.jev.model or (DEFAULT_MODEL if o.jev.provider == "jev" else MOCK_MODEL)
    if pricing.price_for(model) is None:
        raise PricingError(
            f"--max-cost needs a price for model {model!r}, but the pricing snapshot "
            f"{o.policy.pricing} (version {pricing.version}) does not price it: add the model to "
            "the snapshot (or pass --pricing FILE), or run without --max-cost"
        )
    return SpendLimit(o.limits.max_cost, pricing)


def jev_settings(o: RunOptions) -> JevSettings | None:
    """The live Jev settings of a run (None unless it calls the API), checked up front: the key
    is trimmed and refused (RunAborted, exit 4) when it holds whitespace or control characters;
    a plain http:// base URL that is not loopback is refused (ConfigError, exit 2) unless
    ``--allow-insecure-http``."""
    if o.jev.provider != "jev" or o.cache.mode == "offline":
        return None
    key = clean_key(o.jev.api_key, KEY_SOURCE)
    check_base_url(o.jev.base_url, "--base-url", allow_insecure_http=o.jev.allow_insecure_http)
    return JevSettings(
        api_key=key,
        base_url=o.jev.base_url,
        model=o.jev.model or DEFAULT_MODEL,
        attempt_timeout_s=o.retry.timeout,
        row_deadline_s=o.retry.row_deadline,
        max_retries=o.retry.max_retries,
        backoff_initial_s=o.retry.backoff_initial_s,
        backoff_max_s=o.retry.backoff_max_s,
        allow_insecure_http=o.jev.allow_insecure_http,
        limits=o.jev.request_limits,
        max_response_bytes=o.jev.max_response_bytes,
    )


def open_cache(o: RunOptions) -> ReplyCache | None:
    """The run's reply cache: none with ``--cache off``; read-only with ``--offline`` (a replay
    never changes a byte of the cache directory)."""
    if o.cache.mode == "off":
        return None
    # A lease outlives the longest call its holder can make (then it is taken over).
    return ReplyCache(
        o.cache.cache_dir,
        read_only=o.cache.mode == "offline",
        lease_s=o.retry.row_deadline + 30,
    )


def make_provider(
    o: RunOptions, pricing: PricingSnapshot
) -> tuple[Provider, CachedProvider | None, list[str]]:
    """The provider for the run: behind the --max-cost limit, and behind the reply cache
    for live Jev."""
    if o.jev.provider not in ("mock", "jev"):
        raise ConfigError(f"unknown provider {o.jev.provider!r}; choose mock or jev")
    cost_limit = spend_limit(o, pricing)
    if o.jev.provider == "mock":
        provider: Provider = MockProvider(o.jev.model) if o.jev.model else MockProvider()
        return (BudgetedProvider(provider, cost_limit) if cost_limit else provider), None, []
    model = o.jev.model or DEFAULT_MODEL
    warnings = []
    if model in MODEL_ALIASES and o.cache.mode != "off":
        warnings.append(
            f"model {model!r} is an alias: the release behind it can change between runs, so "
            "a cache keyed on it can mix releases; pin a release (e.g. --model jev-1.13.0) "
            "for reproducible backfills"
        )
    settings = jev_settings(o)
    limiter = RateLimiter(
        o.rate.concurrency,
        max_rps=o.rate.max_rps,
        max_tokens_per_s=o.rate.max_tokens_per_s,
        adaptive=o.rate.adaptive,
    )
    inner: Provider = OfflineJev(model) if settings is None else JevProvider(settings, limiter)
    cache = open_cache(o)
    if cost_limit is not None:
        inner = BudgetedProvider(inner, cost_limit, o.jev.request_limits)
    cached = CachedProvider(inner, cache, o.cache.mode, o.jev.request_limits)
    return cached, cached, warnings


def load_thresholds(o: RunOptions) -> tuple[Thresholds, PolicyFile | None]:
    """The thresholds (and routing) of --policy and the policy itself, else the configured
    thresholds and None."""
    if o.policy.policy is None:
        return o.policy.thresholds, None
    try:
        data = o.policy.policy.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read policy {o.policy.policy}: {exc.strerror or exc}") from None
    from ragbatch.calibrate import load_policy, thresholds_of

    policy = load_policy(data, str(o.policy.policy))
    per = tuple(
        (name, pair[0], pair[1])
        for name, pair in sorted(thresholds_of(policy).items())
        if pair != (policy.fail_threshold, policy.pass_threshold)
    )
    thresholds = Thresholds(policy.fail_threshold, policy.pass_threshold, per, policy.routing)
    return thresholds, policy


def make_claims(o: RunOptions) -> ClaimConfig | None:
    """Claim mode settings, or None for basic (whole-answer) groundedness."""
    if o.claims.groundedness == "basic":
        return None
    if o.claims.groundedness != "claims":
        raise ConfigError(
            f"unknown groundedness mode {o.claims.groundedness!r}; choose basic or claims"
        )
    extractor: ClaimExtractor | AsyncClaimExtractor | None = EXTRACTORS.get(
        o.claims.claim_extractor
    )
    if o.claims.claim_extractor == "llm":
        from ragbatch.providers import API_KEY_ENV, ChatClient, LlmClaimExtractor

        if not o.judge.judge_api_key:
            raise ConfigError(f"--claim-extractor llm needs a key: set {API_KEY_ENV}")
        chat = ChatClient(
            o.judge.judge_base_url,
            o.judge.judge_api_key,
            o.judge.judge_model,
            RateLimiter(o.rate.concurrency, max_rps=o.rate.max_rps),
            timeout_s=o.retry.timeout,
            max_retries=o.retry.max_retries,
            allow_insecure_http=o.jev.allow_insecure_http,
            max_response_bytes=o.jev.max_response_bytes,
        )
        extractor = LlmClaimExtractor(chat)
    if extractor is None:
        raise ConfigError(
            f"unknown claim extractor {o.claims.claim_extractor!r}; choose "
            + " or ".join([*sorted(EXTRACTORS), "llm"])
        )
    if o.claims.claim_evidence not in ("cited", "context"):
        raise ConfigError(
            f"unknown claim evidence scope {o.claims.claim_evidence!r}; choose cited or context"
        )
    scope: Scope = "cited" if o.claims.claim_evidence == "cited" else "context"
    return ClaimConfig(extractor, scope)


def make_baseline(o: RunOptions) -> BaselineJudge:
    """The fallback judge: recorded verdicts, the lexical check, or an LLM judge."""
    if o.judge.baseline == "recorded":
        return RecordedBaseline()
    if o.judge.baseline == "lexical":
        from ragbatch.providers import LexicalBaseline

        return LexicalBaseline()
    if o.judge.baseline == "llm":
        from ragbatch.providers import API_KEY_ENV, LlmJudge

        if not o.judge.judge_api_key and o.cache.mode != "offline":
            raise ConfigError(f"--baseline llm needs a key: set {API_KEY_ENV}")
        limiter = RateLimiter(o.rate.concurrency, max_rps=o.rate.max_rps)
        cache = open_cache(o)
        return LlmJudge(
            o.judge.judge_base_url,
            o.judge.judge_api_key or "",
            o.judge.judge_model,
            cache,
            limiter,
            timeout_s=o.retry.timeout,
            max_retries=o.retry.max_retries,
            backoff_initial_s=o.retry.backoff_initial_s,
            backoff_max_s=o.retry.backoff_max_s,
            allow_insecure_http=o.jev.allow_insecure_http,
            max_response_bytes=o.jev.max_response_bytes,
            close_cache=True,
        )
    raise ConfigError(f"unknown baseline {o.judge.baseline!r}; choose recorded, lexical or llm")


@dataclass(frozen=True)
class Parts:
    """Everything a run is made of, built from its options by :func:`build_parts`."""

    options: RunOptions
    pricing: PricingSnapshot
    thresholds: Thresholds  # the flags', or the --policy file's
    claims: ClaimConfig | None
    baseline: BaselineJudge
    reader: RowSource
    provider: Provider
    cached: CachedProvider | None
    info: RunInfo
    total: int | None  # rows the progress display counts to (None: unknown)
    known_rows: int | None  # rows of a JSONL file, known before the run

    async def aclose(self) -> None:
        """Close what holds connections (the provider closes the cache)."""
        await self.provider.aclose()
        await self.baseline.aclose()
        if self.claims is not None and not isinstance(self.claims.extractor, ClaimExtractor):
            await self.claims.extractor.aclose()


def open_reader(o: RunOptions) -> RowSource:
    """The run's rows: the API's in-memory source, else the dataset in its format."""
    i = o.input
    return i.source or open_dataset(
        i.dataset,
        i.format,
        mapping=i.mapping,
        outputs=i.outputs,
        ignore_unknown_fields=i.ignore_unknown_fields,
    )


def row_counts(o: RunOptions, reader: RowSource) -> tuple[int | None, int | None]:
    """(the progress total, the rows of a JSONL file): a file's non-blank lines (a trace
    export has several lines a row); a shard counts its own rows, a planned part knows them."""
    i, shard = o.input, o.scale.shard_of
    by_lines = i.source is None and i.format not in ("openinference", "langfuse")
    total = count_lines(str(i.dataset)) if by_lines else None
    if shard is not None:
        from ragbatch.run._shards import count_shard_rows, part_rows

        jsonl = i.format == "jsonl" and i.source is None and o.display.progress != "none"
        total = count_shard_rows(i.dataset, shard) if jsonl else part_rows(reader)
    # a JSONL file's non-blank lines are its rows (any other line fails the run)
    return total, total if i.format == "jsonl" and shard is None else None


def build_parts(o: RunOptions, warn: Callable[[str], None]) -> Parts:
    """Check the options, then make the parts; refusals come before anything is sent."""
    check_options(o)
    check_outputs(o)
    pricing = load_pricing(o.policy.pricing)
    thresholds, policy = load_thresholds(o)
    claims = make_claims(o)
    check_slice_fields(o)  # before the first row (stops reading once every field is seen)
    for warning in option_warnings(o):
        warn(warning)
    baseline = make_baseline(o)
    reader = open_reader(o)
    total, known_rows = row_counts(o, reader)
    limit, rows_out = o.output.max_report_rows, o.output.rows_out
    if known_rows is not None and limit is not None and known_rows > limit and not rows_out:
        warn(
            f"{total} rows > --max-report-rows {limit}: the report will keep aggregates only; "
            "add --rows-out PATH to keep per-row results"
        )
    provider, cached, warnings = make_provider(o, pricing)  # last: it holds connections
    for warning in warnings:
        warn(warning)
    info = RunInfo(
        dataset_name=reader.name,
        dataset_sha256="",  # known once the whole file is read
        provider=provider.name,
        requested_model=provider.model,
        baseline=baseline.name,
        thresholds=thresholds,
        pricing=pricing,
        claims=(claims.extractor.name, claims.scope) if claims else None,
        ks=o.metrics.ks,
        slice_by=tuple(o.metrics.slice_by or ()),
        policy_version=policy.version if policy else None,
        guarantee=policy.guarantee if policy else None,
        max_report_rows=limit,
        rows_out=rows_out is not None,
    )
    parts = (pricing, thresholds, claims, baseline, reader, provider, cached, info)
    return Parts(o, *parts, total, known_rows)


def estimate_options(o: RunOptions) -> Estimate:
    """``ragbatch estimate``: the calls, tokens and cost of the run ``o`` describes, built
    from the same parts as the run (pricing, claim mode, reader, size limits), sending
    nothing; the reply cache is only read."""
    from ragbatch.run._estimate import estimate_run

    pricing = load_pricing(o.policy.pricing)
    claims = make_claims(o)
    live = o.jev.provider == "jev"
    model = o.jev.model or (DEFAULT_MODEL if live else MOCK_MODEL)
    limits = o.jev.request_limits if live else None
    cache_dir = o.cache.cache_dir
    cache = ReplyCache(cache_dir, read_only=True) if live and cache_dir.exists() else None
    try:
        return estimate_run(open_reader(o), model, ENDPOINT, pricing, cache, claims, limits)
    finally:
        if cache is not None:
            cache.close()
