"""Reading a task's JSON output from its stdout, and the reserved fields the engine reads from it."""

from __future__ import annotations

import math
from typing import Any

from crucible_core.contract.json_bounds import JsonRefused, loads_bounded

MAX_OUTPUT_BYTES = 256 * 1024  # a task's JSON line beyond this is refused, not truncated
MAX_OUTPUT_DEPTH = 64  # a task's output feeds later tasks' inputs: structured, never this deep


def last_json_object(stdout: str) -> tuple[dict[str, Any] | None, str]:
    """The last non-empty stdout line parsed as a JSON object, or None with the reason."""
    for line in reversed(stdout.splitlines()):
        text = line.strip()
        if not text:
            continue
        if len(text.encode()) > MAX_OUTPUT_BYTES:
            return None, f"the last stdout line is over {MAX_OUTPUT_BYTES} bytes"
        try:
            value = loads_bounded(text, max_chars=MAX_OUTPUT_BYTES, max_depth=MAX_OUTPUT_DEPTH)
        except JsonRefused as exc:
            return None, f"the last non-empty stdout line is not usable JSON: {exc}"
        if not isinstance(value, dict):
            return None, "the last non-empty stdout line is JSON but not an object"
        return value, ""
    return None, "no output on stdout"


def finite_score(output: Any) -> float | None:
    if not isinstance(output, dict):
        return None
    score = output.get("score")
    if isinstance(score, bool) or not isinstance(score, int | float):
        return None
    return float(score) if math.isfinite(score) else None


def reported_cost(output: dict[str, Any] | None) -> float:
    """`cost_usd` a task reports about itself (an agent turn's spend); absent or bad means 0."""
    if not output:
        return 0.0
    cost = output.get("cost_usd")
    if isinstance(cost, bool) or not isinstance(cost, int | float) or not math.isfinite(cost):
        return 0.0
    return max(0.0, float(cost))


def declared_status(output: dict[str, Any] | None) -> str | None:
    """The task's own verdict on itself: "skipped" or "fail"; every other value is ignored."""
    if output is None:
        return None
    status = output.get("status")
    return status if status in ("skipped", "fail") else None
