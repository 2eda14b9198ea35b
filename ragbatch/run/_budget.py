"""A spending limit for a run (``--max-cost``): reserve before sending, settle after (async).

Each attempt reserves its estimated cost times a safety margin before it is sent; the reply's
real usage then settles it. A sent attempt that gets no usable reply may still have been billed:
it stays counted at its whole reservation unless its reply proves otherwise (a 4xx, see
:func:`is_unbilled`), so timeouts, resets and cut replies cannot spend past the limit. When the
next reservation would pass the limit, no further attempt is sent (not even a retry): the rows
left are recorded as failed with kind ``budget-exhausted`` (not evaluated), the calls in flight
finish, and the report says it is incomplete. A run whose model the snapshot does not price is
refused before its first call (``run._preflight.check_max_cost``). Cache hits cost nothing and
are answered before this layer, so rerunning with a larger budget resumes where the run stopped.

``ragbatch watch`` adds a rolling cap (``--max-cost-per-hour``): an attempt is refused, with
kind ``hourly-budget``, when the money spent in the last hour (settled attempts, by when they
settled) plus what is reserved and its own reservation would pass it. Such a row is not a
failure of the trace: the watcher keeps the trace in flight and judges it once the spending
of an hour ago has aged out.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

from ragbatch.core import (
    BUDGET_KIND,
    PER_MILLION,
    TOO_LARGE_KIND,
    Call,
    MeteredProvider,
    PricingSnapshot,
    Provider,
    ProviderError,
    Reply,
    RequestLimits,
    RunAborted,
    estimate_input_tokens,
    oversize_reason,
)

MARGIN = 1.5  # the estimator is within a few percent of the loopback server; real Jev may differ
HOURLY_KIND = "hourly-budget"  # refused by --max-cost-per-hour: judged later, not failed
HOUR_S = 3600.0


class SpendLimit:
    """Money reserved and spent so far against a maximum, in the snapshot's currency, and
    optionally against a rolling hourly maximum (``per_hour``; ``clock`` in seconds)."""

    def __init__(
        self,
        max_usd: float | None,
        pricing: PricingSnapshot,
        margin: float = MARGIN,
        *,
        per_hour: float | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.max_usd = max_usd
        self.pricing = pricing
        self.margin = margin
        self.per_hour = per_hour
        self.clock = clock
        self.spent = 0.0
        self.reserved = 0.0
        self.exhausted = False
        self.peak_commitment = 0.0
        self.hour: deque[tuple[float, float]] = deque()  # (when settled, amount), the last hour

    def spent_last_hour(self) -> float:
        """Money settled in the last hour (what ``per_hour`` is checked against)."""
        horizon = self.clock() - HOUR_S
        while self.hour and self.hour[0][0] <= horizon:
            self.hour.popleft()
        return sum(amount for _, amount in self.hour)

    def record(self, when: float, amount: float) -> None:
        """Count ``amount`` as settled at ``when`` (a restarted watcher's last hour)."""
        self.hour.append((when, amount))

    def refusal(self, amount: float) -> ProviderError | None:
        """Reserve ``amount``, or the error that refuses the attempt (nothing reserved)."""
        if self.per_hour is not None and not self.exhausted:
            hourly = self.spent_last_hour()
            if hourly + self.reserved + amount > self.per_hour:
                return ProviderError(
                    f"not evaluated yet: --max-cost-per-hour {self.per_hour} "
                    f"{self.pricing.currency} would be exceeded (spent {hourly:.6f} in the "
                    "last hour)",
                    kind=HOURLY_KIND,
                )
        if self.max_usd is not None and not self.reserve(amount):
            return ProviderError(
                f"not evaluated: --max-cost {self.max_usd} {self.pricing.currency} "
                f"would be exceeded (spent {self.spent:.6f})",
                kind=BUDGET_KIND,
            )
        if self.max_usd is None:
            self.reserved += amount
        return None

    def cost(self, model: str, tokens_in: int, tokens_out: int) -> float:
        price = self.pricing.price_for(model)
        if price is None:
            return 0.0  # unpriced usage shows as "cost unavailable" in the report
        return (
            tokens_in * price.input_per_million + tokens_out * price.output_per_million
        ) / PER_MILLION

    def reserve(self, amount: float) -> bool:
        limit = float("inf") if self.max_usd is None else self.max_usd
        if self.exhausted or self.spent + self.reserved + amount > limit:
            self.exhausted = True
            return False
        self.reserved += amount
        self.peak_commitment = max(self.peak_commitment, self.spent + self.reserved)
        return True

    def settle(self, reserved: float, actual: float) -> None:
        self.reserved -= reserved
        self.spent += actual
        if self.per_hour is not None and actual > 0:
            self.hour.append((self.clock(), actual))


def is_unbilled(error: BaseException | None) -> bool:
    """Whether an attempt's error proves the service did not bill it: a complete 4xx reply
    (400, 404, 408, 413, 422, 429: the request was refused before any work), a rejected key
    or a refused TLS certificate.
    Anything else a sent request can end in (a timeout, a reset, a cut or non-JSON body, a 5xx,
    a reply that fails the schema, a cancelled call) may have been billed."""
    # the only one an attempt raises: HTTP 401/403, or a TLS certificate refused before
    # anything was sent
    if isinstance(error, RunAborted):
        return True
    status = error.status if isinstance(error, ProviderError) else None
    return status is not None and 400 <= status < 500


class BudgetedProvider:
    """Wraps a provider; refuses calls (or, for a provider that retries inside itself, each
    further attempt) once the limit would be passed."""

    def __init__(
        self, inner: Provider, limit: SpendLimit, sizes: RequestLimits | None = None
    ) -> None:
        self.inner = inner
        self.limit = limit
        self.sizes = sizes  # the inner provider's size limits: such a call is never reserved
        self.name = inner.name
        self.model = inner.model
        self.endpoint = inner.endpoint
        # A provider that retries reserves per attempt through this object, not per call.
        self.per_attempt = isinstance(inner, MeteredProvider)
        if isinstance(inner, MeteredProvider):
            inner.meter = self

    def begin(self, call: Call) -> float:
        """Reserve one attempt's estimate x margin, or raise ``budget-exhausted``."""
        estimate = estimate_input_tokens(call.request)
        outputs = 2 * len(call.request.questions)
        amount = self.limit.cost(self.model, estimate, outputs) * self.limit.margin
        refused = self.limit.refusal(amount)
        if refused is not None:
            raise refused
        return amount

    def end(self, reserved: float, reply: Reply | None, error: BaseException | None) -> None:
        """Settle an attempt: a reply at its usage; a failure that proves no billing at 0;
        any other failure at its whole reservation (it may have been billed)."""
        if reply is None:
            self.limit.settle(reserved, 0.0 if is_unbilled(error) else reserved)
            return
        usage = reply.usage
        # a release the snapshot does not price (behind a priced alias) is charged at the
        # requested model's price: counting it as free would let the limit pass unseen
        priced = reply.model if self.limit.pricing.price_for(reply.model) else self.model
        self.limit.settle(
            reserved, self.limit.cost(priced, usage.input_tokens, usage.output_tokens)
        )

    async def fetch_answers(self, call: Call) -> Reply:
        too_large = oversize_reason(call.request, self.sizes) if self.sizes else None
        if too_large is not None:  # not sent: reserving for it could end the run for nothing
            raise ProviderError(too_large, kind=TOO_LARGE_KIND)
        if self.per_attempt:
            return await self.inner.fetch_answers(call)
        reserved = self.begin(call)
        try:
            reply = await self.inner.fetch_answers(call)
        except BaseException:  # a provider without retries that failed sent nothing billable
            self.limit.settle(reserved, 0.0)
            raise
        self.end(reserved, reply, None)
        return reply

    async def aclose(self) -> None:
        await self.inner.aclose()


def spent_of(provider: Provider) -> float | None:
    """What the --max-cost limit in ``provider``'s chain counts as spent (None: no limit)."""
    found: Provider | None = provider
    while found is not None:
        if isinstance(found, BudgetedProvider):
            return found.limit.spent
        found = getattr(found, "inner", None)
    return None
