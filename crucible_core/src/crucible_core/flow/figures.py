"""Figures the views print the same way, apart from the flow model's records.

The console and RESULTS.md (every `crucible run` has both) need these and none of the model's records,
which cost a few milliseconds to define at every start (issue 27, docs/performance.md).
"""

from __future__ import annotations

import json
from typing import Any

OUTPUT_CHARS = 2000  # a task's output as the views carry it: enough to read, never a whole file


def improvement_pct(baseline: float | None, value: float | None, direction: str) -> float | None:
    """How much better than the baseline, in percent (positive is better whichever way is better)."""
    if baseline is None or value is None or baseline == 0:
        return None
    gain = (value - baseline) if direction != "lower" else (baseline - value)
    return 100.0 * gain / abs(baseline)


def output_text(value: Any) -> str:
    """A task's JSON output as one line of compact JSON, cut at OUTPUT_CHARS ("" when it has none)."""
    if value is None:
        return ""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text if len(text) <= OUTPUT_CHARS else text[: OUTPUT_CHARS - 1] + "…"


def versus_baseline(baseline: float | None, value: float | None, direction: str) -> str:
    """How much better than the baseline, as the views print it ("+16.6%"); "" when unknown.

    From a baseline of 0 there is no percentage, so the change itself is shown ("+3"); positive
    is better either way.
    """
    if baseline is None or value is None:
        return ""
    if baseline == 0:
        return f"{(baseline - value) if direction == 'lower' else (value - baseline):+.6g}"
    pct = improvement_pct(baseline, value, direction)
    return f"{pct:+.1f}%" if pct is not None else ""
