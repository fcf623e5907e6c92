"""Budgets and ends: iteration, cost and wall-clock limits as pure checks."""

from __future__ import annotations

import attrs


@attrs.frozen
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
