"""OpenAI list prices by model, and the cost of a codex turn's token usage.

`codex exec` reports tokens, never money: a turn's cost is this table over the usage its
`--json` stream reports. Update the figures here when list prices change.
"""

from __future__ import annotations

import attrs


@attrs.frozen
class Price:
    """USD per million tokens. OpenAI bills cached input at a tenth of input and no cache-write premium."""

    input: float
    output: float

    @property
    def cached_input(self) -> float:
        return self.input * 0.1


# Matched by substring, the first hit winning, so "gpt-5.3-codex" prices as codex whatever its
# family prefix. Short-context standard rates.
PRICES: tuple[tuple[str, Price], ...] = (
    ("codex", Price(1.75, 14.0)),
    ("luna", Price(0.20, 1.20)),
    ("terra", Price(2.0, 12.0)),
    ("sol", Price(5.0, 30.0)),
)

# A model the table does not know is priced at the dearest rate: --max-cost then stops a run
# early rather than letting an unpriced model spend without limit.
FALLBACK = max((price for _, price in PRICES), key=lambda p: p.output)


@attrs.frozen
class Usage:
    """Token counts as `codex exec --json` reports them: `input_tokens` includes the cached ones."""

    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    reasoning_output_tokens: int = 0  # already inside output_tokens; kept for the record

    @classmethod
    def of(cls, raw: object) -> Usage:
        def count(name: str) -> int:
            value = raw.get(name) if isinstance(raw, dict) else None
            return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0

        return cls(
            count("input_tokens"),
            count("cached_input_tokens"),
            count("output_tokens"),
            count("reasoning_output_tokens"),
        )

    @property
    def uncached_input_tokens(self) -> int:
        return max(self.input_tokens - self.cached_input_tokens, 0)

    def as_fields(self) -> dict[str, int]:
        """In the agent-event vocabulary (the cached prefix is a cache read; no cache writes)."""
        return {
            "input_tokens": self.uncached_input_tokens,
            "output_tokens": self.output_tokens,
            "cache_read_input_tokens": min(self.cached_input_tokens, self.input_tokens),
            "cache_creation_input_tokens": 0,
        }


def price_of(model: str) -> tuple[Price, bool]:
    """The price for a model name, and whether the table knew it (False: the fallback)."""
    name = model.lower()
    for fragment, price in PRICES:
        if fragment in name:
            return price, True
    return FALLBACK, False


def cost_usd(model: str, usage: Usage) -> float:
    price, _ = price_of(model)
    cached = min(usage.cached_input_tokens, usage.input_tokens)
    total = (
        usage.uncached_input_tokens * price.input
        + cached * price.cached_input
        + usage.output_tokens * price.output
    )
    return total / 1_000_000
