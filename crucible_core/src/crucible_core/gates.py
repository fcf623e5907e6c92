"""Gates: what the loop asks between iterations and around a turn (operator orders, steering, escalation, parking)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from crucible_core import escalation, parking
from crucible_core.control.inbox import Inbox, Order
from crucible_core.ledger import Ledger
from crucible_core.loop import LoopExit, Run, Segment, fingerprint, reject, run_baseline
from crucible_core.parking import WaitMode

if TYPE_CHECKING:
    from crucible_core.engine import Engine


class Aborted(BaseException):
    """An operator abort interrupting a running child; BaseException so no driver swallows it."""


class Gates:
    """What the loop asks between iterations and around a turn: operator orders, steering, escalation, parking.

    Orders arrive on the control bridge's threads and wait in the inbox; the loop takes them
    here, at its own safe points, and settles each in the admission ledger once it took effect.
    """

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.inbox = Inbox()
        self.ledger: Ledger | None = None
        self.stop_reason: str | None = None
        self.paused = False
        self.max_park: float | None = None
        self.interruptible = False  # a child (turn, measure) runs: an abort may interrupt it
        self.delivered_steer: list[str] = []
        self._steers: list[Order] = []
        self._delivering: list[Order] = []
        self._steer_file_text: str | None = None

    # -- settling ---------------------------------------------------------------------------
    def settle(self, order: Order, outcome: str, note: str = "") -> None:
        if self.ledger is not None and not order.unrecorded:
            self.ledger.settle(order.key, outcome, note)

    def request_stop(self, reason: str) -> None:
        self.stop_reason = reason

    def check_abort(self) -> None:
        if self.inbox.abort_requested:
            raise Aborted

    def settle_aborts(self) -> None:
        for order in self.inbox.take(frozenset({"abort", "stop"})):
            self.settle(order, "applied", "the run stopped")

    # -- the iteration head -----------------------------------------------------------------
    def iteration_head(self, run: Run) -> LoopExit | None:
        ended = self._drain(run)
        while ended is None and (self.paused or self._blocked(run)):
            ended = self._park(run)
        return ended

    def _blocked(self, run: Run) -> bool:
        return run.pending is not None and run.pending.mode is WaitMode.BLOCK

    def _drain(self, run: Run) -> LoopExit | None:
        engine = self.engine
        if self.stop_reason is not None:
            engine.note(f"stopping: {self.stop_reason}")
            return LoopExit.STOPPED
        for order in self.inbox.take():
            kind, payload = order.input, order.payload
            if kind in ("abort", "stop"):
                engine.note(
                    f"{'aborted' if kind == 'abort' else 'stopped'} by the operator: {payload.get('reason') or 'no reason given'}"
                )
                self.settle(order, "applied", "the run stopped")
                self.settle_aborts()
                return LoopExit.STOPPED
            if kind == "steer":
                self._steers.append(order)
            elif kind == "set-budget":
                engine.budget = attrs.evolve(engine.budget, **payload)
                engine.note(f"budget set by the operator: {engine.budget.to_wire()}")
                self.settle(order, "applied")
            elif kind in ("pause", "resume"):
                self.paused = kind == "pause"
                self.settle(order, "applied")
                self.publish(run)
            elif kind == "rescope":
                ended = self.rescope(run, str(payload["regime"]), order)
                if ended is not None:
                    return ended
            elif kind == "approve":
                if run.pending is None:
                    self.settle(order, "rejected", "no approval is pending")
                    continue
                ended = self.rescope(run, run.pending.regime, order)
                if ended is not None:
                    return ended
            elif kind == "deny":
                if run.pending is None:
                    self.settle(order, "rejected", "no approval is pending")
                    continue
                ended = self.resolve_denied(run, "denied", payload.get("reason") or "denied by the operator")
                self.settle(order, "applied")
                if ended is not None:
                    return ended
        return None

    def _park(self, run: Run) -> LoopExit | None:
        """Idle until an order ends the park; parked time pauses the budget clock."""
        engine = self.engine
        on_approval = not self.paused
        engine.phase("paused" if self.paused else "parked", run.iteration)
        self.publish(run)
        started = engine.now()
        deadline = started + self.max_park if on_approval and self.max_park is not None else None
        try:
            while True:
                ended = self._drain(run)
                if ended is not None:
                    return ended
                if not (self.paused or self._blocked(run)):
                    return None
                now = engine.now()
                if deadline is not None and not self.paused and now >= deadline:
                    return self.resolve_denied(
                        run, "timeout", f"no answer within --max-park ({self.max_park:.0f}s)"
                    )
                # a short poll so a SIGTERM (which only sets stop_reason) is noticed promptly
                self.inbox.wait(1.0 if deadline is None else max(0.01, min(1.0, deadline - now)))
        finally:
            run.parked_total += engine.now() - started
            engine.budget_event(run)
            self.publish(run)

    # -- approvals and re-scopes --------------------------------------------------------------
    def resolve_denied(self, run: Run, outcome: str, reason: str) -> LoopExit | None:
        """A deny or a --max-park timeout: a block wait has no fallback and escalates; continue notes it."""
        engine = self.engine
        pending = run.pending
        assert pending is not None
        engine.log.emit("approval_resolved", outcome=outcome, reason=reason, handle=pending.handle)
        run.pending = None
        self.publish(run)
        if pending.mode is WaitMode.BLOCK:
            engine.log.emit(
                "escalation",
                iter=run.iteration,
                category="needs-info",
                reason=f"a block-mode approval was {outcome}: {reason}",
                evidence=[pending.handle, pending.trace_id],
            )
            return LoopExit.ESCALATED
        engine.note(
            f"approval {pending.handle or pending.trace_id} {outcome} ({reason}); staying in the current regime"
        )
        return None

    def rescope(self, run: Run, regime: str, order: Order | None) -> LoopExit | None:
        """Open a new Segment at `regime`: re-baseline the kept state under a new fingerprint."""
        engine = self.engine
        if run.pending is not None:
            engine.log.emit(
                "approval_resolved",
                outcome="granted",
                reason=f"re-scoped to {regime}",
                handle=run.pending.handle,
            )
            run.pending = None
        old = run.segment
        engine.world.restore(old.best_token)  # measure the kept state, not a leftover candidate
        run.segment = Segment(
            regime=regime,
            fingerprint=fingerprint(engine.goal, engine.judge.gate, regime),
            best_token=old.best_token,
            index=old.index + 1,
        )
        engine.emit_segment(run, reason="rescope")
        if order is not None:
            self.settle(order, "applied", f"segment {run.segment.index}")
        self.publish(run)
        return run_baseline(engine, run)

    # -- around a turn --------------------------------------------------------------------------
    def take_steer(self) -> str:
        """Steering for the next prompt: operator steers from the bridge, then the STEER.md file channel."""
        self._steers.extend(self.inbox.take(frozenset({"steer"})))
        self._delivering, self._steers = self._steers, []
        parts = [str(o.payload.get("text", "")).strip() for o in self._delivering]
        self._steer_file_text = None
        try:
            text = self.engine.paths.steer_file.read_text(encoding="utf-8")
        except (FileNotFoundError, IsADirectoryError):
            text = ""
        if text.strip():
            self._steer_file_text = text
            parts.append(text.strip())
        return "\n\n".join(p for p in parts if p)

    def steer_delivered(self, iteration: int) -> None:
        """The prompt carrying the steer was handed to the agent: settle it and clear the file channel."""
        for order in self._delivering:
            self.settle(order, "applied", f"delivered to iteration {iteration}")
        self._delivering = []
        if self._steer_file_text is not None:
            path = self.engine.paths.steer_file
            try:
                current = path.read_text(encoding="utf-8")
            except FileNotFoundError:
                current = ""
            # keep whatever the operator appended after we read it
            rest = (
                current[len(self._steer_file_text) :]
                if current.startswith(self._steer_file_text)
                else current
            )
            path.write_text(rest, encoding="utf-8")
            self._steer_file_text = None

    def after_turn(self, run: Run, iteration: int) -> LoopExit | None:
        """Take the agent's markers: an escalation ends the run, a pending ask registers a wait."""
        engine = self.engine
        paths = engine.paths
        self.check_abort()
        escalated = escalation.take_marker(paths.escalation_file, paths.state_dir / escalation.MARKER_NAME)
        if escalated is not None:
            engine.log.emit("escalation", iter=iteration, **escalated.to_wire())
            reject(engine, run, iteration, f"escalated ({escalated.category}): {escalated.reason}")
            return LoopExit.ESCALATED
        marker = parking.take_marker(paths.provisioning_file)
        if marker is not None:
            parsed = parking.parse_marker(marker, changed_anything=bool(engine.world.changed_paths()))
            if isinstance(parsed, str):
                engine.note(f"ignored the agent's approval request: {parsed}", level="warn")
            else:
                if run.pending is not None:
                    engine.note(
                        f"a new approval request replaces {run.pending.handle or run.pending.trace_id}"
                    )
                run.pending = parsed
                engine.log.emit("approval_wait", iter=iteration, **parsed.to_wire())
                self.publish(run)
        return None

    def publish(self, run: Run) -> None:
        self.inbox.publish(
            paused=self.paused,
            approval=run.pending.to_wire() if run.pending is not None else None,
            regime=run.segment.regime,
            segment=run.segment.index,
            fingerprint=run.segment.fingerprint,
        )
