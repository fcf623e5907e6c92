"""Durations as people write them (90s, 15m, 1h30m): one parser for the manifest, the CLI and live orders."""

from __future__ import annotations

import math
import re

from crucible_core.errors import UsageError

# One or more <number><unit> parts ("90", "90s", "1h30m", "1.5h"); a bare number is seconds.
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?", re.ASCII)
_DURATION = re.compile(r"^(?:\d+(?:\.\d+)?\s*(?:ms|s|m|h|d)?\s*)+$", re.ASCII)
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
# The longest duration anything accepts: a year. Beyond it a timer overflows the platform's
# clock arithmetic, and no honest deadline or budget is that long.
MAX_DURATION_SECONDS = 365 * 86400.0
DURATION_FORMS = "seconds as a number, or a duration such as 90s, 15m, 2h, 1h30m"


def duration_seconds(text: str) -> float | None:
    """'90', '90s', '15m', '1h30m', '1d' -> seconds; None when the text is not a duration."""
    text = text.strip()
    if len(text) > 64 or not _DURATION.match(text):
        return None
    parts = _DURATION_PART.findall(text)
    # A bare number only makes sense alone: "1h30" is more likely a typo than 1h and 30s.
    if len(parts) > 1 and any(not unit for _, unit in parts):
        return None
    return sum(float(number) * _UNIT_SECONDS[unit or "s"] for number, unit in parts)


def duration_problem(seconds: float) -> str | None:
    """Why a number of seconds cannot be a deadline, or None when it can."""
    if not math.isfinite(seconds):
        return "must be a finite number of seconds"
    if seconds <= 0:
        return "must be more than zero"
    if seconds > MAX_DURATION_SECONDS:
        return "must be at most a year (31536000 seconds)"
    return None


def parse_duration(text: str) -> float:
    """A command-line duration in seconds; a UsageError says what is expected."""
    seconds = duration_seconds(text)
    if seconds is None:
        raise UsageError(f"cannot read {text[:64]!r} as a duration", hint="use e.g. 90s, 15m, 2h, 1h30m")
    if seconds > MAX_DURATION_SECONDS:
        raise UsageError(f"duration {text[:64]!r} is longer than a year", hint="use a shorter duration")
    return seconds


def short_duration(seconds: float) -> str:
    """Seconds as a person reads them, in at most six characters: 12.3s, 5m03s, 2h07m."""
    if seconds < 60:
        return f"{max(0.0, seconds):.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"
