"""Budgets and ends: iteration, cost and wall-clock limits as pure checks."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from crucible_core.contract.records import value_methods
from crucible_core.control.caps import BOUNDS, cap_value
from crucible_core.durations import short_duration
from crucible_core.errors import WorkspaceError


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class Budget:
    iterations: int | None = None
    max_cost: float | None = None
    max_time: float | None = None  # seconds of unparked wall-clock

    def exhausted(self, *, iterations_done: int, spent: float, active_seconds: float) -> str | None:
        """Why the run must stop now, or None. Checked at every iteration head."""
        if self.iterations is not None and iterations_done >= self.iterations:
            return f"iterations spent ({iterations_done}/{self.iterations})"
        if self.max_cost is not None and spent >= self.max_cost:
            return f"cost budget spent (${spent:.4f} of ${self.max_cost:.4f})"
        if self.max_time is not None and active_seconds >= self.max_time:
            return f"time budget spent ({active_seconds:.0f}s of {self.max_time:.0f}s)"
        return None

    def to_wire(self) -> dict[str, float | int | None]:
        return {"iterations": self.iterations, "max_cost": self.max_cost, "max_time": self.max_time}

    def describe(self) -> str:
        return describe_caps(self.to_wire())


def layered_budget(recorded: Mapping[str, Any], *later: Mapping[str, Any]) -> Budget:
    """The caps a run recorded, each overridden in turn by every later layer that sets it.

    The recorded caps are read back from the session log, so each is checked again: one out of
    range (a hand-edited line, an older release) that no later layer replaces refuses the resume
    instead of being taken as "no cap".
    """
    caps: dict[str, Any] = {}
    damaged: dict[str, str] = {}
    for name in BOUNDS:
        if recorded.get(name) is None:
            continue
        try:
            caps[name] = cap_value(name, recorded[name])
        except ValueError as exc:
            damaged[name] = str(exc)
    for layer in later:
        for name in BOUNDS:
            if layer.get(name) is not None:
                caps[name] = layer[name]
                damaged.pop(name, None)
    if damaged:
        raise WorkspaceError(
            f"the run's recorded budget cannot be used: {'; '.join(damaged.values())}",
            hint="give the resume that cap again (--iterations, --max-cost or --max-time)",
        )
    return Budget(**caps)


def describe_caps(caps: Mapping[str, Any]) -> str:
    """A budget's caps in words ("9 iterations, $5.00, 2h00m active"), from its wire form."""
    parts = []
    iterations = caps.get("iterations")
    if iterations is not None:
        parts.append(f"{iterations} iteration{'' if iterations == 1 else 's'}")
    if caps.get("max_cost") is not None:
        parts.append(f"${float(caps['max_cost']):.2f}")
    if caps.get("max_time") is not None:
        parts.append(f"{short_duration(float(caps['max_time']))} active")
    return ", ".join(parts) if parts else "no limit"
