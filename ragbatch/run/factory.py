"""Builds the parts of a run from its options: pricing, thresholds, provider chain, judges (I/O).

The provider chain for live Jev is ``CachedProvider(BudgetedProvider(JevProvider))``: cache
hits are free and answered first, the budget sees only calls that will be paid for.
"""

from __future__ import annotations

from pathlib import Path

from ragbatch.calibrate.policy_file import PolicyFile, load_policy, thresholds_of
from ragbatch.core.claims import EXTRACTORS, AsyncClaimExtractor, ClaimExtractor, Scope
from ragbatch.core.errors import ConfigError, PricingError
from ragbatch.core.policy import Thresholds
from ragbatch.core.pricing import PricingSnapshot, parse_pricing
from ragbatch.core.provider import BaselineJudge, Provider
from ragbatch.core.questions import RequestLimits
from ragbatch.providers.apikey import check_base_url, clean_key
from ragbatch.providers.baseline import RecordedBaseline
from ragbatch.providers.cache import CachedProvider, ReplyCache
from ragbatch.providers.jev import (
    DEFAULT_MODEL,
    KEY_SOURCE,
    MODEL_ALIASES,
    JevProvider,
    JevSettings,
    OfflineJev,
)
from ragbatch.providers.lexical import LexicalBaseline
from ragbatch.providers.llm_judge import API_KEY_ENV, ChatClient, LlmClaimExtractor, LlmJudge
from ragbatch.providers.mock import MOCK_MODEL, MockProvider
from ragbatch.providers.ratelimit import RateLimiter
from ragbatch.run.budget import BudgetedProvider, SpendLimit
from ragbatch.run.config import JobConfig
from ragbatch.run.runner import ClaimConfig


def load_pricing(path: Path) -> PricingSnapshot:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise PricingError(
            f"cannot read pricing snapshot {path}: {exc.strerror or exc} (pass --pricing FILE)"
        ) from None
    return parse_pricing(data, str(path))


def spend_limit(config: JobConfig, pricing: PricingSnapshot) -> SpendLimit | None:
    """The ``--max-cost`` limit, refused up front when the snapshot cannot price the model
    (the limit could not be enforced: every call would count as free)."""
    if config.max_cost is None:
        return None
    model = config.model or (DEFAULT_MODEL if config.provider == "jev" else MOCK_MODEL)
    if pricing.price_for(model) is None:
        raise PricingError(
            f"--max-cost needs a price for model {model!r}, but the pricing snapshot "
            f"{config.pricing} (version {pricing.version}) does not price it: add the model to "
            "the snapshot (or pass --pricing FILE), or run without --max-cost"
        )
    return SpendLimit(config.max_cost, pricing)


def request_limits(config: JobConfig) -> RequestLimits:
    """The size limits a request is checked against before it is sent (and by estimate)."""
    return RequestLimits(config.max_request_tokens, config.max_state_question_tokens)


def jev_settings(config: JobConfig) -> JevSettings | None:
    """The live Jev settings of a run (None unless it calls the API), checked up front: the key
    is trimmed and refused (RunAborted, exit 4) when it holds whitespace or control characters;
    a plain http:// base URL that is not loopback is refused (ConfigError, exit 2) unless
    ``--allow-insecure-http``."""
    if config.provider != "jev" or config.cache_mode == "offline":
        return None
    key = clean_key(config.api_key, KEY_SOURCE)
    check_base_url(config.base_url, "--base-url", allow_insecure_http=config.allow_insecure_http)
    return JevSettings(
        api_key=key,
        base_url=config.base_url,
        model=config.model or DEFAULT_MODEL,
        attempt_timeout_s=config.attempt_timeout_s,
        row_deadline_s=config.row_deadline_s,
        max_retries=config.max_retries,
        backoff_initial_s=config.backoff_initial_s,
        backoff_max_s=config.backoff_max_s,
        allow_insecure_http=config.allow_insecure_http,
        limits=request_limits(config),
        max_response_bytes=config.max_response_bytes,
    )


def open_cache(config: JobConfig) -> ReplyCache | None:
    """The run's reply cache: none with ``--cache off``; read-only with ``--offline`` (a replay
    never changes a byte of the cache directory)."""
    if config.cache_mode == "off":
        return None
    # A lease outlives the longest call its holder can make (then it is taken over).
    return ReplyCache(
        config.cache_dir,
        read_only=config.cache_mode == "offline",
        lease_s=config.row_deadline_s + 30,
    )


def make_provider(
    config: JobConfig, pricing: PricingSnapshot
) -> tuple[Provider, CachedProvider | None, list[str]]:
    """The provider for the run: budget-limited, and behind the reply cache for live Jev."""
    if config.provider not in ("mock", "jev"):
        raise ConfigError(f"unknown provider {config.provider!r}; choose mock or jev")
    limit = spend_limit(config, pricing)
    if config.provider == "mock":
        provider: Provider = MockProvider(config.model) if config.model else MockProvider()
        return (BudgetedProvider(provider, limit) if limit else provider), None, []
    model = config.model or DEFAULT_MODEL
    warnings = []
    if model in MODEL_ALIASES and config.cache_mode != "off":
        warnings.append(
            f"model {model!r} is an alias: the release behind it can change between runs, so "
            "a cache keyed on it can mix releases; pin a release (e.g. --model jev-1.13.0) "
            "for reproducible backfills"
        )
    settings = jev_settings(config)
    limiter = RateLimiter(
        config.concurrency,
        max_rps=config.max_rps,
        max_tokens_per_s=config.max_tokens_per_s,
        adaptive=config.adaptive,
    )
    inner: Provider = OfflineJev(model) if settings is None else JevProvider(settings, limiter)
    cache = open_cache(config)
    if limit is not None:
        inner = BudgetedProvider(inner, limit, request_limits(config))
    cached = CachedProvider(inner, cache, config.cache_mode)
    return cached, cached, warnings


def load_thresholds(config: JobConfig) -> tuple[Thresholds, PolicyFile | None]:
    """The thresholds (and routing) of --policy and the policy itself, else the configured
    thresholds and None."""
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
    thresholds = Thresholds(policy.fail_threshold, policy.pass_threshold, per, policy.routing)
    return thresholds, policy


def make_claims(config: JobConfig) -> ClaimConfig | None:
    """Claim mode settings, or None for basic (whole-answer) groundedness."""
    if config.groundedness == "basic":
        return None
    if config.groundedness != "claims":
        raise ConfigError(
            f"unknown groundedness mode {config.groundedness!r}; choose basic or claims"
        )
    extractor: ClaimExtractor | AsyncClaimExtractor | None = EXTRACTORS.get(config.claim_extractor)
    if config.claim_extractor == "llm":
        if not config.judge_api_key:
            raise ConfigError(f"--claim-extractor llm needs a key: set {API_KEY_ENV}")
        chat = ChatClient(
            config.judge_base_url,
            config.judge_api_key,
            config.judge_model,
            RateLimiter(config.concurrency, max_rps=config.max_rps),
            timeout_s=config.attempt_timeout_s,
            max_retries=config.max_retries,
            allow_insecure_http=config.allow_insecure_http,
            max_response_bytes=config.max_response_bytes,
        )
        extractor = LlmClaimExtractor(chat)
    if extractor is None:
        raise ConfigError(
            f"unknown claim extractor {config.claim_extractor!r}; choose "
            + " or ".join([*sorted(EXTRACTORS), "llm"])
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
        cache = open_cache(config)
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
            allow_insecure_http=config.allow_insecure_http,
            max_response_bytes=config.max_response_bytes,
        )
    raise ConfigError(f"unknown baseline {config.baseline!r}; choose recorded, lexical or llm")
