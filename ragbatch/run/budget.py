"""A spending limit for a run (``--max-cost``): reserve before sending, settle after (async).

Each call reserves its estimated cost times a safety margin before it is sent; the reply's
real usage then settles it. When the next reservation would pass the limit, no further call is
sent: the rows left are recorded as failed with kind ``budget-exhausted`` (not evaluated), the
calls in flight finish, and the report says it is incomplete. A run whose model the snapshot does
not price is refused before its first call (see ``run.factory.spend_limit``). Cache hits cost nothing and are
answered before this layer, so rerunning with a larger budget resumes where the run stopped.
"""

from __future__ import annotations

from ragbatch.core.errors import BUDGET_KIND, TOO_LARGE_KIND, ProviderError
from ragbatch.core.pricing import PER_MILLION, PricingSnapshot
from ragbatch.core.provider import Call, Provider, Reply
from ragbatch.core.questions import RequestLimits, estimate_input_tokens, oversize_reason

MARGIN = 1.5  # the estimator is within a few percent of the loopback server; real Jev may differ


class SpendLimit:
    """Money reserved and spent so far against a maximum, in the snapshot's currency."""

    def __init__(self, max_usd: float, pricing: PricingSnapshot, margin: float = MARGIN) -> None:
        self.max_usd = max_usd
        self.pricing = pricing
        self.margin = margin
        self.spent = 0.0
        self.reserved = 0.0
        self.exhausted = False
        self.peak_commitment = 0.0

    def cost(self, model: str, tokens_in: int, tokens_out: int) -> float:
        price = self.pricing.price_for(model)
        if price is None:
            return 0.0  # unpriced usage shows as "cost unavailable" in the report
        return (
            tokens_in * price.input_per_million + tokens_out * price.output_per_million
        ) / PER_MILLION

    def reserve(self, amount: float) -> bool:
        if self.exhausted or self.spent + self.reserved + amount > self.max_usd:
            self.exhausted = True
            return False
        self.reserved += amount
        self.peak_commitment = max(self.peak_commitment, self.spent + self.reserved)
        return True

    def settle(self, reserved: float, actual: float) -> None:
        self.reserved -= reserved
        self.spent += actual


class BudgetedProvider:
    """Wraps a provider; refuses calls once the limit would be passed."""

    def __init__(
        self, inner: Provider, limit: SpendLimit, sizes: RequestLimits | None = None
    ) -> None:
        self.inner = inner
        self.limit = limit
        self.sizes = sizes  # the inner provider's size limits: such a call is never reserved
        self.name = inner.name
        self.model = inner.model
        self.endpoint = inner.endpoint

    async def fetch_answers(self, call: Call) -> Reply:
        too_large = oversize_reason(call.request, self.sizes) if self.sizes else None
        if too_large is not None:  # not sent: reserving for it could end the run for nothing
            raise ProviderError(too_large, kind=TOO_LARGE_KIND)
        estimate = estimate_input_tokens(call.request)
        outputs = 2 * len(call.request.questions)
        amount = self.limit.cost(self.model, estimate, outputs) * self.limit.margin
        if not self.limit.reserve(amount):
            raise ProviderError(
                f"not evaluated: --max-cost {self.limit.max_usd} {self.limit.pricing.currency} "
                f"would be exceeded (spent {self.limit.spent:.6f})",
                kind=BUDGET_KIND,
            )
        try:
            reply = await self.inner.fetch_answers(call)
        except BaseException:
            self.limit.settle(amount, 0.0)
            raise
        usage = reply.usage
        # a release the snapshot does not price (behind a priced alias) is charged at the
        # requested model's price: counting it as free would let the limit pass unseen
        priced = reply.model if self.limit.pricing.price_for(reply.model) else self.model
        self.limit.settle(amount, self.limit.cost(priced, usage.input_tokens, usage.output_tokens))
        return reply

    async def aclose(self) -> None:
        await self.inner.aclose()
