"""What a model call costs, in nano-dollars: configured prices per model, 0 for a self-hosted model.

Design constraint: prices are configuration (``pricing:``, keyed by model name
or prefix), never guessed; a call without a price costs 0, and a self-hosted
model's records say why rather than looking like a forgotten price. A hosted
model without a price is found when the configuration loads
(:func:`unpriced_providers`), so a cost budget that could never trip is either
reported or refused (``unpriced_models``), not discovered on the invoice.
"""

from __future__ import annotations

from decimal import ROUND_HALF_EVEN, Decimal

from tarsy.config.schema import LLMProviderConfig, ModelPrice, TarsyConfig
from tarsy.llm.backends import backend_for
from tarsy.models import TokenUsage
from tarsy.money import nanos_of_dollars

SELF_HOSTED_NOTE = "self-hosted model: no per-token price (add one under pricing to count it)"


def cost_of(price: ModelPrice | None, usage: TokenUsage) -> int:
    """Nano-dollar cost of one call; thinking tokens are billed as output. 0 without a price.

    Computed in decimals from the configured prices as written (``0.15`` per
    million is 0.15, not its binary neighbour), rounded once to a nano-dollar.
    """
    if price is None:
        return 0
    output = usage.output_tokens + usage.thinking_tokens
    per_million = usage.input_tokens * Decimal(nanos_of_dollars(price.input_per_million)) + (
        output * Decimal(nanos_of_dollars(price.output_per_million))
    )
    return int((per_million / 1_000_000).to_integral_value(rounding=ROUND_HALF_EVEN))


def priced(config: TarsyConfig, provider: LLMProviderConfig, usage: TokenUsage) -> tuple[int, str]:
    """Nano-dollar cost of a call and, for a self-hosted model without a price, why it is 0."""
    price = config.price_for(provider.model)
    if price is None and backend_for(provider.type).self_hosted:
        return 0, SELF_HOSTED_NOTE
    return cost_of(price, usage), ""


def unpriced_providers(config: TarsyConfig) -> list[tuple[str, str]]:
    """``(location, message)`` for every provider of a hosted model that has no price."""
    problems: list[tuple[str, str]] = []
    for name, provider in sorted(config.llm_providers.items()):
        if backend_for(provider.type).self_hosted or config.price_for(provider.model):
            continue
        problems.append(
            (
                f"llm_providers.{name}.model",
                f"hosted model {provider.model!r} has no price: its calls would cost 0 and "
                "a session's max_cost_usd could never trip; add it under pricing",
            )
        )
    return problems
