"""Prices of the models an OpenAI-speaking endpoint serves, and the cost of a turn's token usage.

Neither opencode nor pi prices a model of the seeded `crucible` provider (its entry carries no
cost), so a turn's cost is this table over the tokens the CLI reports. Update the figures here
when list prices change.
"""

from __future__ import annotations

import attrs


@attrs.frozen
class Price:
    """USD per million tokens: fresh input, output, and input read from the provider's prompt cache."""

    input: float
    output: float
    cache_read: float


# Keyed by the start of the model's own name (after any `org/` prefix a gateway puts in front);
# the longest matching key wins, so "gpt-4.1-mini" beats "gpt-4.1". Open-weight families are
# priced at what the common hosted endpoints charge for their larger sizes.
PRICES: dict[str, Price] = {
    "gpt-5-nano": Price(0.05, 0.40, 0.005),
    "gpt-5-mini": Price(0.25, 2.0, 0.025),
    "gpt-5": Price(1.25, 10.0, 0.125),
    "gpt-4.1-nano": Price(0.10, 0.40, 0.025),
    "gpt-4.1-mini": Price(0.40, 1.60, 0.10),
    "gpt-4.1": Price(2.0, 8.0, 0.50),
    "gpt-4o-mini": Price(0.15, 0.60, 0.075),
    "gpt-4o": Price(2.50, 10.0, 1.25),
    "o1": Price(15.0, 60.0, 7.50),
    "o3-mini": Price(1.10, 4.40, 0.55),
    "o3": Price(2.0, 8.0, 0.50),
    "o4-mini": Price(1.10, 4.40, 0.275),
    "qwen": Price(0.40, 1.20, 0.40),
    "llama": Price(0.60, 0.60, 0.60),
    "deepseek": Price(0.30, 1.20, 0.07),
    "mistral": Price(2.0, 6.0, 2.0),
    "gemma": Price(0.10, 0.30, 0.10),
}

# A model the table does not know is priced at the dearest rate in it: --max-cost then stops a
# run early rather than letting an unpriced model spend without limit.
FALLBACK = max(PRICES.values(), key=lambda p: p.output)


@attrs.frozen
class Usage:
    """Token counts of one or more model calls; `input_tokens` excludes the cached ones."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
        )

    def as_fields(self) -> dict[str, int]:
        """In the agent-event vocabulary (`agent_usage`)."""
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_read_input_tokens": self.cache_read_tokens,
            "cache_creation_input_tokens": self.cache_write_tokens,
        }


def price_of(model: str) -> tuple[Price, bool]:
    """The price for a model name, and whether the table knew it (False: the fallback)."""
    name = model.lower().rsplit("/", 1)[-1]
    matches = [prefix for prefix in PRICES if name.startswith(prefix)]
    if not matches:
        return FALLBACK, False
    return PRICES[max(matches, key=len)], True


def cost_usd(model: str, usage: Usage) -> float:
    price, _ = price_of(model)
    total = (
        (usage.input_tokens + usage.cache_write_tokens) * price.input
        + usage.output_tokens * price.output
        + usage.cache_read_tokens * price.cache_read
    )
    return total / 1_000_000
