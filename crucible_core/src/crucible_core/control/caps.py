"""The budget caps an operator may set and their bounds: one check wherever a cap enters a run.

A cap arrives from a `crucible run` or `crucible budget` flag, a bridge request, a ledger line
read back on resume and the session log's start line. Each is checked here, so NaN, an
infinity or 1e308 is refused with the allowed range, never taken as "no cap" or as a
deadline the clock arithmetic cannot hold.
"""

from __future__ import annotations

from typing import Any

import attrs

from crucible_core.contract.records import value_methods
from crucible_core.durations import MAX_DURATION_SECONDS


@value_methods
@attrs.frozen(repr=False, eq=False)
class _Bound:
    whole: bool  # a whole number (iterations), else any finite number
    most: float
    unit: str  # how the range is said: "" / " USD" / " seconds (a year)"


# Far beyond any honest run, and low enough that every view and deadline computed from a cap stays exact.
BOUNDS = {
    "iterations": _Bound(whole=True, most=1_000_000, unit=""),
    "max_cost": _Bound(whole=False, most=1_000_000.0, unit=" USD"),
    "max_time": _Bound(whole=False, most=MAX_DURATION_SECONDS, unit=" seconds (a year)"),
}


def allowed_range(name: str) -> str:
    """The range a cap may take, in words: 'a whole number from 0 to 1000000'."""
    bound = BOUNDS[name]
    kind = "a whole number" if bound.whole else "a finite number"
    return f"{kind} from 0 to {bound.most:.0f}{bound.unit}"


def cap_value(name: str, value: Any) -> int | float:
    """`value` as the cap `name`, or a ValueError that names the allowed range."""
    bound = BOUNDS[name]
    kinds = (int,) if bound.whole else (int, float)
    # NaN and the infinities fail the range comparison itself (a NaN compares false to all).
    if isinstance(value, bool) or not isinstance(value, kinds) or not 0 <= value <= bound.most:
        raise ValueError(f"{name} must be {allowed_range(name)}, not {_shown(value)}")
    return int(value) if bound.whole else float(value)


def _shown(value: Any) -> str:
    try:
        return repr(value)[:40]
    except ValueError:  # an integer too long to print
        return "an integer too long to print"
