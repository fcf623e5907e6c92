"""The one pricing table: USD per million tokens by model, and the cost of a turn's token usage.

The Claude Code CLI reports its own cost; this table prices turns that have no such report
(the `anthropic` harness, and a CLI turn killed before its final result). Update it here when
list prices change; nothing else in crucible holds a price.
"""

from __future__ import annotations

import attrs


@attrs.frozen
class Price:
    """USD per million tokens. Prompt-cache writes cost 1.25x input and reads 0.1x, for every model."""

    input: float
    output: float

    @property
    def cache_write(self) -> float:
        return self.input * 1.25

    @property
    def cache_read(self) -> float:
        return self.input * 0.1


# Keyed by model-name prefix; the longest matching prefix wins, so "claude-opus-4-6" beats
# "claude-opus-4". The figures agree with what the pinned Claude Code CLI charges for each model.
# CLI aliases ("opus", "sonnet", ...) price as the dearest model they have stood for.
PRICES: dict[str, Price] = {
    "claude-fable-5-2": Price(8.0, 40.0),
    "claude-fable-5": Price(10.0, 50.0),
    "claude-mythos-5-2": Price(8.0, 40.0),
    "claude-mythos-5": Price(10.0, 50.0),
    "claude-opus-5": Price(5.0, 25.0),
    "claude-sonnet-5": Price(2.0, 10.0),
    "claude-haiku-5": Price(0.5, 0.5),
    "claude-opus-4-8": Price(5.0, 25.0),
    "claude-opus-4-7": Price(5.0, 25.0),
    "claude-opus-4-6": Price(5.0, 25.0),
    "claude-opus-4-5": Price(5.0, 25.0),
    "claude-opus-4": Price(15.0, 75.0),
    "claude-sonnet-4": Price(3.0, 15.0),
    "claude-haiku-4": Price(1.0, 5.0),
    "claude-3-7-sonnet": Price(3.0, 15.0),
    "claude-3-5-sonnet": Price(3.0, 15.0),
    "claude-3-5-haiku": Price(0.80, 4.0),
    "claude-3-haiku": Price(0.25, 1.25),
    "fable": Price(10.0, 50.0),
    "opus": Price(5.0, 25.0),
    "sonnet": Price(3.0, 15.0),
    "haiku": Price(1.0, 5.0),
}

# A model the table does not know is priced at the dearest rate: --max-cost then stops a run
# early rather than letting an unpriced model spend without limit.
FALLBACK = max(PRICES.values(), key=lambda p: p.output)


@attrs.frozen
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_creation_input_tokens + other.cache_creation_input_tokens,
            self.cache_read_input_tokens + other.cache_read_input_tokens,
        )

    @classmethod
    def of(cls, raw: object) -> Usage:
        """Read the token counts of an API `usage` object or mapping; absent counts are zero."""

        def count(name: str) -> int:
            value = raw.get(name) if isinstance(raw, dict) else getattr(raw, name, None)
            return value if isinstance(value, int) and value > 0 else 0

        return cls(
            count("input_tokens"),
            count("output_tokens"),
            count("cache_creation_input_tokens"),
            count("cache_read_input_tokens"),
        )

    def as_fields(self) -> dict[str, int]:
        return attrs.asdict(self)


def price_of(model: str) -> tuple[Price, bool]:
    """The price for a model name, and whether the table knew it (False: the fallback)."""
    name = model.lower()
    # Provider spellings ("us.anthropic.claude-...", "claude-...@20251101") keep the family.
    if "claude-" in name:
        name = name[name.index("claude-") :]
    matches = [prefix for prefix in PRICES if name.startswith(prefix)]
    if not matches:
        return FALLBACK, False
    return PRICES[max(matches, key=len)], True


def cost_usd(model: str, usage: Usage) -> float:
    price, _ = price_of(model)
    total = (
        usage.input_tokens * price.input
        + usage.output_tokens * price.output
        + usage.cache_creation_input_tokens * price.cache_write
        + usage.cache_read_input_tokens * price.cache_read
    )
    return total / 1_000_000
