"""``ragbatch estimate``: calls, tokens and cost of a run before spending (reads files, no network).

Estimator (documented in docs/guides/large-runs.md): input tokens of a call = 260 tokens of per-call
overhead + the state's canonical JSON bytes / 4 + each question's canonical JSON bytes / 4;
output tokens = 2 per question (Jev does not charge them today). Calls already in the cache
cost nothing and are subtracted; for them the estimate is compared with the usage the service
actually reported, which measures the estimator's error on your data. Calls over a request size
limit (``--max-request-tokens``, ``--max-state-question-tokens``) are listed, not counted: the
run does not send them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from pydantic import ValidationError

from ragbatch.core import (
    CALL_OVERHEAD_TOKENS,
    PER_MILLION,
    Call,
    ClaimExtractor,
    ConfigError,
    JevRequest,
    PricingSnapshot,
    Probe,
    ProviderError,
    RequestLimits,
    Row,
    Trace,
    claim_groups,
    estimate_input_tokens,
    is_probed,
    oversize_reason,
    probe_request,
    request_key,
    step_requests,
)
from ragbatch.metrics import Out, sample_size
from ragbatch.providers.cache import ReplyCache, decode_entry
from ragbatch.run._options import AuditOptions
from ragbatch.run._runner import ClaimConfig, row_requests


class EstimatorAccuracy(Out):
    compared_calls: int
    estimated_tokens: int
    actual_tokens: int
    total_relative_error: float  # (estimated - actual) / actual over the compared calls
    mean_absolute_relative_error: float


class TooLarge(Out):
    """A call over a request size limit: not sent, its row fails (``request-too-large``)."""

    row: str  # the row id
    message: str  # which limit, with the estimate


class Estimate(Out):
    rows: int
    calls: int
    cache_hits: int
    input_tokens: int  # to be sent (cache misses only)
    output_tokens: int
    cost_usd: float | None
    currency: str
    pricing_version: str
    model: str
    method: str
    accuracy: EstimatorAccuracy | None = None
    too_large: tuple[TooLarge, ...] = ()  # not counted in the tokens to send
    # --probe: the judge audit's calls, counted in ``calls`` and the tokens above (expected
    # over the sample: every row's probe requests times the sampled share)
    probe_calls: int = 0


METHOD = (
    f"{CALL_OVERHEAD_TOKENS} tokens per call + canonical JSON bytes of state and questions / 4; "
    "2 output tokens per question; cache hits subtracted"
)


def calls_of(
    item: Row | Trace, model: str, claims: ClaimConfig | None, context_order: str = "as-is"
) -> list[Call]:
    """Every call a run makes for ``item``: a row's request(s) (two with ``--context-order
    both``) and claim groups, or one request per judged step of a trace (docs/semantics.md §8)."""
    if isinstance(item, Trace):
        asked = step_requests(item, model)
        return [Call(request=a.request, row=item, step=a.step) for a in asked]
    return [Call(request=r, row=item) for r in requests_of(item, model, claims, context_order)]


def probe_tokens(row: Row, model: str, probes: tuple[Probe, ...]) -> tuple[int, int, int]:
    """(calls, input tokens, output tokens) of the probes of one row (docs/semantics.md §9)."""
    asked = [probe_request(p, row, model) for p in probes if is_probed(p, row)]
    tokens_in = sum(estimate_input_tokens(r) for r in asked)
    return len(asked), tokens_in, sum(2 * len(r.questions) for r in asked)


def requests_of(
    row: Row, model: str, claims: ClaimConfig | None, context_order: str = "as-is"
) -> list[JevRequest]:
    requests = row_requests(row, model, context_order)
    if claims is not None:
        if not isinstance(claims.extractor, ClaimExtractor):
            raise ConfigError(
                "cannot estimate claim calls with an extractor that calls a model; estimate "
                "with --claim-extractor provided or sentences"
            )
        extracted = claims.extractor.extract(row)
        requests += [g.request for g in claim_groups(row, extracted, claims.scope, model)]
    return requests


def cached_input_tokens(cache: ReplyCache | None, endpoint: str, call: Call) -> int | None:
    """The input tokens the cached reply to the call's request was billed, or None on a miss
    (a corrupt entry is fetched again: a miss)."""
    key = request_key(endpoint, call.request, call.probe)
    data = cache.get(key) if cache is not None else None
    if data is None:
        return None
    try:
        reply = decode_entry(data, call, key)
    except (ValueError, ValidationError, ProviderError):
        return None
    return reply.usage.input_tokens


def accuracy_of(errors: list[float], estimated: int, actual: int) -> EstimatorAccuracy | None:
    """How far the estimator was from the billed tokens of the cached calls (None: none)."""
    if not errors:
        return None
    return EstimatorAccuracy(
        compared_calls=len(errors),
        estimated_tokens=estimated,
        actual_tokens=actual,
        total_relative_error=(estimated - actual) / actual,
        mean_absolute_relative_error=math.fsum(errors) / len(errors),
    )


def estimate_run(
    rows: Iterable[Row | Trace],
    model: str,
    endpoint: str,
    pricing: PricingSnapshot,
    cache: ReplyCache | None,
    claims: ClaimConfig | None = None,
    limits: RequestLimits | None = None,
    audit: AuditOptions | None = None,
) -> Estimate:
    """The calls, tokens and cost of a run over ``rows`` (``audit``: its order and probes)."""
    order = audit.context_order if audit is not None else "as-is"
    probes = audit.probes if audit is not None else ()
    probe_calls = probe_in = probe_out = eligible = 0
    estimated_hits = actual_hits = 0
    errors: list[float] = []
    oversize: list[TooLarge] = []
    n = calls = hits = tokens_in = tokens_out = 0
    for row in rows:
        n += 1
        if probes and isinstance(row, Row):
            eligible += 1
            more = probe_tokens(row, model, probes)
            probe_calls, probe_in, probe_out = (
                a + b for a, b in zip((probe_calls, probe_in, probe_out), more, strict=True)
            )
        for call in calls_of(row, model, claims, order):
            request = call.request
            calls += 1
            estimate = estimate_input_tokens(request)
            actual = cached_input_tokens(cache, endpoint, call)
            if actual is not None:
                hits += 1
                estimated_hits += estimate
                actual_hits += actual
                if actual:
                    errors.append(abs(estimate - actual) / actual)
                continue
            too_large = oversize_reason(request, limits) if limits is not None else None
            if too_large is not None:
                oversize.append(TooLarge(row=row.id, message=too_large))
                continue
            tokens_in += estimate
            tokens_out += 2 * len(request.questions)
    if eligible and audit is not None:
        share = sample_size(eligible, audit.probe_rate) / eligible
        probe_calls = round(share * probe_calls)
        calls += probe_calls
        tokens_in += round(share * probe_in)
        tokens_out += round(share * probe_out)
    price = pricing.price_for(model)
    cost = (
        (tokens_in * price.input_per_million + tokens_out * price.output_per_million) / PER_MILLION
        if price is not None
        else None
    )
    return Estimate(
        rows=n,
        calls=calls,
        cache_hits=hits,
        input_tokens=tokens_in,
        output_tokens=tokens_out,
        cost_usd=cost,
        currency=pricing.currency,
        pricing_version=pricing.version,
        model=model,
        method=METHOD,
        accuracy=accuracy_of(errors, estimated_hits, actual_hits),
        too_large=tuple(oversize),
        probe_calls=probe_calls,
    )
