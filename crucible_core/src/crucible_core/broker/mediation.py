"""The one mediation point: every mediated write asks here, and is counted against its resolved bound.

Broker tools that write outside the workspace call `admit` before they act, and so do the
engine's own writes; nothing else decides whether a write may happen. A refused write fails
the asking call naming the bound and leaves an `output_refused` event; it never ends the run.
Admitted writes leave `output_admitted` events, which is how a resume recounts what is spent.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from crucible_core.broker.outputs import ResolvedOutput, Violation, count_violation, resolve_target
from crucible_core.contract import wire
from crucible_core.errors import CrucibleError, ExitCode

Emit = Callable[[wire.Event], Any]  # SessionLog.emit


class OutputRefused(CrucibleError):
    """A mediated write outside its bound; the message names the bound."""

    exit_code = ExitCode.USAGE

    def __init__(self, violation: Violation) -> None:
        super().__init__(
            violation.message, hint=f"the bound is {violation.bound}; it cannot be changed mid-run"
        )
        self.violation = violation


class Mediator:
    """Counts writes per kind against the resolved bounds; safe to call from any thread."""

    def __init__(
        self,
        outputs: Iterable[ResolvedOutput],
        emit: Emit,
        *,
        params: Mapping[str, str] | None = None,
        used: Mapping[str, int] | None = None,
    ) -> None:
        self.bounds = {o.kind: o for o in outputs}
        self.params = dict(params or {})
        self.used: dict[str, int] = {kind: int((used or {}).get(kind, 0)) for kind in self.bounds}
        self._emit = emit
        self._lock = threading.Lock()

    def admit(
        self, kind: str, target: str | None = None, *, by: str, iteration: int | None = None
    ) -> str | None:
        """Count one write of `kind` to `target` (None: the declared target), or raise OutputRefused.

        Returns the address the write must use.
        """
        with self._lock:
            bound = self.bounds.get(kind)
            if bound is None:
                known = ", ".join(sorted(self.bounds))
                violation = Violation(
                    kind, "[outputs]", f"refused: {kind!r} is not an output kind (known: {known})"
                )
            else:
                resolved = resolve_target(bound, target, self.params)
                if isinstance(resolved, Violation):
                    violation = resolved
                elif self.used[kind] >= bound.count:
                    violation = count_violation(kind, bound.count)
                else:
                    self.used[kind] += 1
                    self._emit(
                        wire.OutputAdmitted(
                            output_kind=kind,
                            target=resolved,
                            tool=by,
                            used=self.used[kind],
                            count=bound.count,
                            iter=iteration,
                        )
                    )
                    return resolved
            self._emit(
                wire.OutputRefused(
                    output_kind=kind,
                    bound=violation.bound,
                    tool=by,
                    detail=violation.message,
                    requested=target,
                    iter=iteration,
                )
            )
        raise OutputRefused(violation)

    def remaining(self) -> dict[str, int]:
        with self._lock:
            return {kind: max(0, b.count - self.used[kind]) for kind, b in self.bounds.items()}


def used_counts(events: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """What a recorded run already spent, per kind (a resume continues the same per-run counts)."""
    used: dict[str, int] = {}
    for event in events:
        if event.get("kind") == "output_admitted":
            kind = str(event.get("output_kind"))
            used[kind] = used.get(kind, 0) + 1
    return used
