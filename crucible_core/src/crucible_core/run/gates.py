"""Gates: what the loop asks between iterations and around a turn (operator orders, steering, parking, the agent's asks for a human)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import attrs

from crucible_core.agent_files import AgentFileRefused, DirectoryWatch, read_regular
from crucible_core.contract import wire
from crucible_core.control import orders
from crucible_core.control.inbox import Inbox, Order
from crucible_core.control.ledger import Ledger
from crucible_core.manifest.paths import write_atomic
from crucible_core.run import parking, signals
from crucible_core.run.context import LoopExit, Run, Segment, fingerprint
from crucible_core.run.parking import WaitMode

if TYPE_CHECKING:
    from crucible_core.run.engine import Engine


# The STEER.md file channel holds an operator's note for the next prompt; a bridge request is as long.
MAX_STEER_BYTES = 256 * 1024


class Aborted(BaseException):
    """An operator abort interrupting a running child; BaseException so no driver swallows it."""


def _unbound(*_args: Any) -> Any:
    raise RuntimeError("the gates were not bound to a loop (build the engine with run.assemble)")


class Gates:
    """What the loop asks between iterations and around a turn: operator orders, steering, escalation, parking.

    Orders arrive on the control bridge's thread and wait in the inbox; the loop takes them
    here, at its own safe points, and settles each in the admission ledger once it took effect.
    The two loop operations a gate needs (re-baseline after a re-scope, discard an escalated
    candidate) are handed in as functions, so the gates never import the loop.
    """

    def __init__(
        self,
        engine: Engine,
        *,
        rebaseline: Callable[[Run], LoopExit | None] = _unbound,
        discard: Callable[[Run, int, str], None] = _unbound,
        inbox: Inbox | None = None,
        ledger: Ledger | None = None,
        max_park: float | None = None,
    ) -> None:
        self.engine = engine
        self.rebaseline = rebaseline
        self.discard = discard
        self.inbox = inbox or Inbox()  # the control bridge's hand-over (the session's, in a run)
        self.ledger = ledger  # None only in unit tests: orders are then never recorded
        self.stop_reason: str | None = None
        self.paused = False
        self.max_park = max_park  # seconds an approval wait may park the run; None waits indefinitely
        self.wait_spent = 0.0  # seconds the outstanding approval parked before the current park
        self._parking_since: float | None = None
        self.interruptible = False  # a child (turn, measure) runs: an abort may interrupt it
        self.delivered_steer: list[str] = []
        self._steers: list[Order] = []
        self._delivering: list[Order] = []
        self._steer_file_text: str | None = None
        self._row_notes: list[dict[str, Any]] = []
        # STEER.md's and the agent's approval request's directories, as the last look that found
        # neither left them: one stat per turn instead of failed opens (agent_files.DirectoryWatch)
        paths = engine.paths
        self._steer_watch = DirectoryWatch(paths.steer_file.parent)
        self._provisioning_watch = DirectoryWatch(paths.provisioning_file.parent)

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
        for order in self.inbox.take(orders.STOPPING):
            self.settle(order, "applied", "the run stopped")

    # -- the iteration head -----------------------------------------------------------------
    def iteration_head(self, run: Run) -> LoopExit | None:
        ended = self._drain(run)
        if ended is None:
            self._check_suspend(run)
        while ended is None and (self.paused or self._blocked(run)):
            ended = self._park(run)
        return ended

    def _blocked(self, run: Run) -> bool:
        return run.pending is not None and run.pending.mode is WaitMode.BLOCK

    def _drain(self, run: Run) -> LoopExit | None:
        engine = self.engine
        if self.stop_reason is not None:
            engine.note(f"stopping at the iteration head: {self.stop_reason}")
            return LoopExit.STOPPED
        for order in self.inbox.take():
            kind, payload = order.input, order.payload
            if kind in orders.STOPPING:
                engine.note(
                    f"{'aborted' if kind == orders.ABORT else 'stopped'} by the operator: {payload.get('reason') or 'no reason given'}"
                )
                self.settle(order, "applied", "the run stopped")
                self.settle_aborts()
                return LoopExit.STOPPED
            if kind == orders.STEER:
                self._steers.append(order)
            elif kind == orders.SET_BUDGET:
                engine.budget = attrs.evolve(engine.budget, **payload)
                engine.note(f"budget set by the operator: {engine.budget.describe()}")
                # the caps in force, for every view that follows them (even in the middle of a park)
                parked_now = engine.now() - self._parking_since if self._parking_since is not None else 0.0
                engine.budget_event(run, parked_now)
                self.settle(order, "applied")
            elif kind in orders.PAUSE_LEVEL:
                engine.note(operator_pause_note(kind, was_paused=self.paused, reason=payload.get("reason")))
                self.paused = kind == orders.PAUSE
                self.settle(order, "applied")
                self.publish(run)
            elif kind == orders.RESCOPE:
                ended = self.rescope(run, str(payload["regime"]), order)
                if ended is not None:
                    return ended
            elif kind == orders.APPROVE:
                if run.pending is None:
                    self.settle(order, "rejected", "no approval is pending")
                    continue
                owner = self.suspended_by(run)
                if owner is not None:
                    self._answer_suspend(run, order, owner)
                    continue
                ended = self.rescope(run, run.pending.regime, order)
                if ended is not None:
                    return ended
            elif kind == orders.DENY:
                if run.pending is None:
                    self.settle(order, "rejected", "no approval is pending")
                    continue
                ended = self.resolve_denied(run, "denied", payload.get("reason") or "denied by the operator")
                self.settle(order, "applied")
                if ended is not None:
                    return ended
        return None

    def _park(self, run: Run) -> LoopExit | None:
        """Idle until an order (or, for an agent's suspend, its answer) ends the park.

        Parked time pauses the budget clock. --max-park bounds an approval wait's whole
        parked time, including what earlier processes of this run already spent on it.
        """
        engine = self.engine
        on_approval = not self.paused
        owner = self.suspended_by(run)
        phase = park_phase(paused=self.paused, suspended=owner.phase if owner is not None else None)
        engine.phase(phase, run.iteration)
        engine.suspend_services(f"the run is {phase}")  # a park may last hours: nothing runs meanwhile
        self.publish(run)
        started = self._parking_since = engine.now()
        deadline = park_deadline(started, self.max_park, self.wait_spent) if on_approval else None
        # a suspend is answered by deleting a file: poll it more often than the inbox needs
        poll = 0.1 if owner is not None else 1.0
        try:
            while True:
                ended = self._drain(run)
                if ended is not None:
                    return ended
                owner = self.suspended_by(run)
                if owner is not None and not owner.held(engine.signal_context):
                    self.resolve_granted(run, f"the {owner.handle} marker was removed")
                if not (self.paused or self._blocked(run)):
                    return None
                now = engine.now()
                if deadline is not None and not self.paused and now >= deadline:
                    return self.resolve_denied(
                        run, "timeout", f"no answer within --max-park ({self.max_park:.0f}s)"
                    )
                # a short poll so a SIGTERM (which only sets stop_reason) is noticed promptly
                self.inbox.wait(poll if deadline is None else max(0.01, min(poll, deadline - now)))
        finally:
            self._parking_since = None
            parked = engine.now() - started
            if run.pending is not None:
                self.wait_spent += parked
            run.parked_total += parked
            engine.budget_event(run)
            self.publish(run)

    # -- approvals and re-scopes --------------------------------------------------------------
    def open_wait(self, run: Run, pending: parking.Pending, iteration: int, **extra: Any) -> None:
        """Register an outstanding approval and open its approval_wait bracket."""
        engine = self.engine
        if run.pending is not None:
            engine.note(f"a new approval request replaces {run.pending.handle or run.pending.trace_id}")
        run.pending = pending
        self.wait_spent = 0.0
        engine.log.emit(wire.ApprovalWait(iter=iteration, **pending.to_wire(), **extra))
        self.publish(run)

    def _emit_resolved(self, pending: parking.Pending, outcome: str, reason: str) -> None:
        waited = self.wait_spent
        if self._parking_since is not None:
            waited += self.engine.now() - self._parking_since
        self.engine.log.emit(
            wire.ApprovalResolved(
                outcome=outcome,
                reason=reason,
                handle=pending.handle,
                waited_s=round(waited, 3),  # parked on this wait, summed over the run's processes
            )
        )

    def resolve_granted(self, run: Run, reason: str) -> None:
        """Close a wait that needs no re-scope (an agent's suspend answered): the run goes on as it was."""
        assert run.pending is not None
        self._emit_resolved(run.pending, "granted", reason)
        run.pending = None
        self.wait_spent = 0.0
        self.publish(run)

    def resolve_denied(self, run: Run, outcome: str, reason: str) -> LoopExit | None:
        """A deny or a --max-park timeout: a block wait has no fallback and escalates; continue notes it."""
        engine = self.engine
        pending = run.pending
        assert pending is not None
        self._emit_resolved(pending, outcome, reason)
        run.pending = None
        self.publish(run)
        if pending.mode is WaitMode.BLOCK:
            engine.log.emit(
                wire.Escalation(
                    iter=run.iteration,
                    category="needs-info",
                    reason=f"a block-mode approval was {outcome}: {reason}",
                    evidence="\n".join(e for e in (pending.handle, pending.trace_id) if e),
                )
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
            self._emit_resolved(run.pending, "granted", f"re-scoped to {regime}")
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
        return self.rebaseline(run)

    # -- around a turn --------------------------------------------------------------------------
    def take_steer(self) -> str:
        """Steering for the next prompt: operator steers from the bridge, then the STEER.md file channel."""
        self._steers.extend(self.inbox.take(frozenset({orders.STEER})))
        self._delivering, self._steers = self._steers, []
        parts = [str(o.payload.get("text", "")).strip() for o in self._delivering]
        self._steer_file_text = None
        stamp = self._steer_watch.stamp()
        try:
            text = "" if self._steer_watch.unchanged(stamp) else self._read_steer_file()
        except FileNotFoundError:
            self._steer_watch.found_nothing(stamp)
            text = ""
        except AgentFileRefused as exc:
            self.engine.note(f"ignored {self.engine.paths.steer_file}: {exc}", level="warn")
            text = ""
        if text.strip():
            self._steer_file_text = text
            parts.append(text.strip())
        return "\n\n".join(p for p in parts if p)

    def pending_steers(self) -> list[str]:
        """Steering that has arrived and is not yet in a prompt, oldest first; nothing is consumed.

        Called from the broker's thread: it reads copies only.
        """
        orders = list(self._steers) + self.inbox.peek(frozenset({"steer"}))
        texts = [str(o.payload.get("text", "")).strip() for o in orders]
        with contextlib.suppress(FileNotFoundError, AgentFileRefused):
            texts.append(self._read_steer_file().strip())
        return [t for t in texts if t]

    def _read_steer_file(self) -> str:
        """The STEER.md channel's text. A local agent can reach the file, so it is read like one the
        agent wrote: a regular file only, never through a link, bounded (FileNotFoundError, AgentFileRefused)."""
        return read_regular(self.engine.paths.steer_file, MAX_STEER_BYTES).decode("utf-8", "replace")

    def steer_delivered(self, iteration: int) -> None:
        """The prompt carrying the steer was handed to the agent: settle it and clear the file channel."""
        for order in self._delivering:
            self.settle(order, "applied", f"delivered to iteration {iteration}")
        self._delivering = []
        if self._steer_file_text is not None:
            path = self.engine.paths.steer_file
            try:
                current = self._read_steer_file()
            except FileNotFoundError:
                current = ""
            except AgentFileRefused:  # no longer a small regular file: leave it for the operator
                self._steer_file_text = None
                return
            # keep whatever the operator appended after we read it
            rest = (
                current[len(self._steer_file_text) :]
                if current.startswith(self._steer_file_text)
                else current
            )
            # by replacing the file: a link planted meanwhile is replaced, never written through
            write_atomic(path, rest.encode("utf-8"))
            self._steer_file_text = None

    def after_turn(self, run: Run, iteration: int) -> LoopExit | None:
        """Take the agent's markers: an escalation ends the run, a pending ask registers a wait."""
        engine = self.engine
        paths = engine.paths
        self.check_abort()
        for owner in engine.signals:
            taken = owner.after_turn(engine.signal_context)
            for trouble in taken.trouble:
                engine.note(trouble, level="warn")
            for note in taken.notes:
                engine.note(f"the agent says ({note.severity}): {note.reason}", level=note.severity)
            self._row_notes.extend(note.to_wire() for note in taken.notes)
            escalated = taken.escalation
            if escalated is not None:
                engine.log.emit(
                    wire.Escalation(
                        iter=iteration,
                        category=escalated.category,
                        reason=escalated.reason,
                        evidence="\n".join(escalated.evidence),  # the contract carries one text
                    )
                )
                self.discard(run, iteration, f"escalated ({escalated.category}): {escalated.reason}")
                return LoopExit.ESCALATED
        stamp = self._provisioning_watch.stamp()
        try:
            if self._provisioning_watch.unchanged(stamp):
                marker = None
            elif (marker := parking.take_marker(paths.provisioning_file)) is None:
                self._provisioning_watch.found_nothing(stamp)
        except AgentFileRefused as exc:
            engine.note(f"ignored the agent's approval request: {parking.MARKER_NAME}: {exc}", level="warn")
            marker = None
        if marker is not None:
            parsed = parking.parse_marker(marker, changed_anything=bool(engine.world.changed_paths()))
            if isinstance(parsed, str):
                engine.note(f"ignored the agent's approval request: {parsed}", level="warn")
            else:
                self.open_wait(run, parsed, iteration)
        return None

    # -- the agent's suspends (crucible_agent_signals) ---------------------------------------------
    def suspended_by(self, run: Run) -> signals.AgentSignals | None:
        """The plugin whose suspend the outstanding wait is, if it is one."""
        return signals.owner(self.engine.signals, run.pending.handle if run.pending is not None else None)

    def _check_suspend(self, run: Run) -> None:
        """At the iteration head, after the turn's row: an agent's suspend parks the run."""
        if self.suspended_by(run) is not None:
            return  # already suspended (a resume re-registered it): the park polls its answer
        for owner in self.engine.signals:
            asked = owner.suspend(self.engine.signal_context)
            if asked is not None:
                pending = parking.Pending(
                    trace_id=owner.handle, regime=run.segment.regime, handle=owner.handle, mode=WaitMode.BLOCK
                )
                self.open_wait(run, pending, run.iteration, reason=asked.reason, marker=asked.marker)
                return

    def _answer_suspend(self, run: Run, order: Order, owner: signals.AgentSignals) -> None:
        """An operator approve answers an agent's suspend as the agent's own channel would."""
        try:
            owner.answer(self.engine.signal_context)
        except OSError as exc:
            self.settle(order, "rejected", f"could not answer the {owner.handle}: {exc}")
            self.engine.note(f"approve could not clear the {owner.handle}: {exc}", "warn")
            return
        self.resolve_granted(run, "approved by the operator")
        self.settle(order, "applied", f"{owner.handle} cleared")

    def take_row_notes(self) -> list[dict[str, Any]]:
        notes, self._row_notes = self._row_notes, []
        return notes

    def publish(self, run: Run) -> None:
        self.inbox.publish(
            paused=self.paused,
            approval=run.pending.to_wire() if run.pending is not None else None,
            regime=run.segment.regime,
            segment=run.segment.index,
            fingerprint=run.segment.fingerprint,
        )


# -- pure decisions ---------------------------------------------------------------------------
def park_phase(*, paused: bool, suspended: str | None) -> str:
    """The phase token a park is logged and reported under: an operator pause wins, then the
    phase of the plugin whose suspend it is ("distressed"), else an approval wait."""
    if paused:
        return "paused"
    return suspended or "parked"


def park_deadline(started: float, max_park: float | None, spent: float) -> float | None:
    """When a wait that already parked `spent` seconds (in earlier processes) times out."""
    if max_park is None:
        return None
    return started + max(0.0, max_park - spent)


def operator_pause_note(kind: str, *, was_paused: bool, reason: str | None) -> str:
    """The log's line for a pause or unpause as it takes effect (the console prints it)."""
    why = f": {reason}" if reason else ""
    if kind == "pause":
        if was_paused:
            return f"pause by the operator: already paused{why}"
        return f"paused by the operator at the iteration head{why} (`crucible unpause` continues)"
    if not was_paused:
        return f"unpause by the operator: the run was not paused{why}"
    return f"unpaused by the operator{why}: continuing"
