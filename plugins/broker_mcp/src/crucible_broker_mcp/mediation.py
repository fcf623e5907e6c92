"""The one mediation point: every mediated write asks here, and is counted against its resolved bound.

Broker tools that write outside the workspace call `admit` before they act, and so do the
engine's own writes (publish-on-keep asks through the run's broker, `TurnBroker.admit`); nothing
else decides whether a write may happen. The bounds are core's resolved declaration; a target
is checked here against its scope (fixed, open within a scope, or bound to a run parameter). A
refused write fails the asking call naming the bound and leaves an `output_refused` event; it
never ends the run. Admitted writes leave `output_admitted` events, which is how a resume
recounts what is spent.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from crucible_core.api import FixedTarget, OutputRefused, ResolvedOutput, Violation, scope_admits, wire

Emit = Callable[[wire.Event], Any]  # SessionLog.emit


def count_violation(kind: str, count: int) -> Violation:
    return Violation(
        kind,
        f"[outputs.{kind}].count = {count}",
        f"refused: this run may make {count} {kind} write(s) ([outputs.{kind}].count) and they are spent",
    )


def resolve_target(
    bound: ResolvedOutput, requested: str | None, params: Mapping[str, str]
) -> str | Violation | None:
    """The address a write may use, or the violation. A fixed target fills an omitted one."""
    kind = bound.kind
    if bound.target is None:
        if not bound.addresses_target:
            return None
        return Violation(
            kind,
            f"[outputs.{kind}].target",
            f"refused: {kind} addresses a target and this run resolved none (declare [outputs.{kind}].target)",
        )
    if isinstance(bound.target, FixedTarget):
        fixed = bound.target.fixed
        if requested is None or scope_admits(fixed, requested):
            return requested if requested is not None else fixed
        return _out_of_scope(kind, requested, fixed)
    scope = bound.target.open
    if scope.param is not None:
        value = params.get(scope.param)
        if value is None:
            return Violation(
                kind,
                f"[outputs.{kind}].target.open.param = {scope.param}",
                f"refused: [outputs.{kind}].target binds run parameter {scope.param!r}, which this run lacks",
            )
        if requested is not None and requested != value:
            return _out_of_scope(kind, requested, value)
        return value
    if requested is None:
        return Violation(
            kind,
            f"[outputs.{kind}].target",
            f"refused: {kind} has an open target ({scope.scope}); name the target inside it",
        )
    if scope_admits(scope.scope, requested):
        return requested
    return _out_of_scope(kind, requested, scope.scope)


def _out_of_scope(kind: str, requested: str, scope: str) -> Violation:
    return Violation(
        kind,
        f"[outputs.{kind}].target = {scope}",
        f"refused: {kind} target {requested!r} is outside [outputs.{kind}].target = {scope!r}",
    )


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
