"""The engine: one run's drivers, log and budget, and the operations the loop calls (propose, measure, ...)."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

import attrs

from crucible_core import escalation, parking
from crucible_core import prompt as prompts
from crucible_core.budget import Budget
from crucible_core.contract import Direction, Reading
from crucible_core.control.inbox import Inbox, Order
from crucible_core.drivers import Drivers
from crucible_core.injects import refresh_frozen
from crucible_core.ledger import Ledger
from crucible_core.loop import LoopExit, Run, Segment, fingerprint, measure_context, run_baseline
from crucible_core.manifest.loader import LoadedManifest
from crucible_core.parking import WaitMode
from crucible_core.paths import RunPaths, write_atomic
from crucible_core.protocols import AgentBackend, Judge, Turn, TurnResult, World
from crucible_core.redact import Redactor
from crucible_core.results_md import render_results
from crucible_core.session_log import SessionLog

DEFAULT_TURN_TIMEOUT = 3600.0


@attrs.frozen
class RunOptions:
    no_early_stop: bool = False
    harness: str | None = None
    model: str | None = None
    turn_timeout: float | None = None


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
            engine.world.restore(run.segment.best_token)
            engine.row(
                run,
                iteration=iteration,
                verdict="discard",
                reading=Reading.invalid(f"escalated ({escalated.category}): {escalated.reason}"),
            )
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


@attrs.define
class Engine:
    loaded: LoadedManifest
    paths: RunPaths
    drivers: Drivers
    log: SessionLog
    budget: Budget
    options: RunOptions
    redactor: Redactor
    agent_env: dict[str, str]
    goal: str
    method_template: str
    gates: Gates = attrs.field(default=None)
    now: Callable[[], float] = time.monotonic

    def __attrs_post_init__(self) -> None:
        if self.gates is None:
            self.gates = Gates(self)

    # -- driver shortcuts -------------------------------------------------------------------
    @property
    def world(self) -> World:
        return self.drivers.world

    @property
    def judge(self) -> Judge:
        return self.drivers.judge

    @property
    def backend(self) -> AgentBackend:
        return self.drivers.backend

    @property
    def direction(self) -> Direction:
        judge = self.loaded.manifest.judge
        return judge.direction if judge else Direction.HIGHER

    @property
    def tiebreak_direction(self) -> Direction | None:
        judge = self.loaded.manifest.judge
        return judge.tiebreak_direction if judge else None

    # -- session log ------------------------------------------------------------------------
    def phase(self, phase: str, iteration: int) -> None:
        self.log.emit("phase", phase=phase, iter=iteration)
        self.gates.inbox.publish(phase=phase, iter=iteration)

    def step(self, step: str, iteration: int) -> None:
        """Finer than a phase: which operation of an iteration is under way (resume classifies on it).

        Step boundaries are also where an abort that arrived between children takes effect.
        """
        self.gates.check_abort()
        self.log.emit("step", step=step, iter=iteration)
        self.gates.inbox.publish(step=step)

    def emit_segment(self, run: Run, *, reason: str) -> None:
        seg = run.segment
        self.log.emit(
            "segment",
            index=seg.index,
            regime=seg.regime,
            fingerprint=seg.fingerprint,
            snapshot=seg.best_token,
            reason=reason,
        )

    def budget_event(self, run: Run) -> None:
        self.log.emit(
            "budget",
            iterations_done=run.iteration,
            spent=round(run.spent, 6),
            active_s=round(run.active_seconds(), 3),
            parked_s=round(run.parked_total, 3),
            **self.budget.to_wire(),
        )

    def note(self, text: str, level: str = "info") -> None:
        self.log.emit("note", level=level, text=text)

    def row(
        self,
        run: Run,
        *,
        iteration: int,
        verdict: str,
        reading: Reading | None,
        turn: TurnResult | None = None,
        sha: str | None = None,
        token: str | None = None,
        note: str | None = None,
    ) -> None:
        seg = run.segment
        fields: dict[str, Any] = {
            "iter": iteration,
            "gate": self.judge.gate,
            "verdict": verdict,
            "valid": reading.valid if reading else None,
            "score": reading.score if reading else None,
            "tiebreak": reading.tiebreak if reading else None,
            "solved": reading.solved if reading else False,
            "best": seg.best.score,
            "best_tiebreak": seg.best.tiebreak,
            "baseline": seg.baseline_score,
            "baseline_total": seg.baseline_total,
            "note": note if note is not None else (reading.note if reading else ""),
            "detail": dict(reading.detail) if reading and reading.detail else None,
            "cost": turn.cost_usd if turn else 0.0,
            "sha": sha,
            "snapshot": token,
            "fingerprint": seg.fingerprint,
        }
        event = self.log.emit("row", **fields)
        if iteration > 0:
            run.iteration = max(run.iteration, iteration)
            # a re-baseline row sits at the current iteration and spends none
            if verdict == "keep":
                run.kept += 1
            elif verdict == "discard":
                run.discarded += 1
        if sha:
            run.kept_shas.append(sha)
        run.rows.append(event)
        self.budget_event(run)
        self.gates.inbox.publish(
            iter=run.iteration,
            best=seg.best.score,
            baseline=seg.baseline_score,
            kept=run.kept,
            discarded=run.discarded,
            spent=round(run.spent, 6),
            budget=self.budget.to_wire(),
            solved=run.solved or bool(reading and reading.solved and verdict != "discard"),
        )
        self.write_results(run)

    def write_results(self, run: Run) -> None:
        text = render_results(
            gate=self.judge.gate, goal=self.goal, rows=run.rows, best=run.segment.best.score
        )
        try:
            write_atomic(self.paths.results_md, self.redactor.text(text).encode("utf-8"), durable=False)
        except OSError as exc:
            self.note(f"could not update RESULTS.md: {exc}", level="warn")

    # -- operations the loop calls ----------------------------------------------------------
    def iteration_head(self, run: Run) -> LoopExit | None:
        return self.gates.iteration_head(run)

    def after_turn(self, run: Run, iteration: int) -> LoopExit | None:
        return self.gates.after_turn(run, iteration)

    def status_text(self, run: Run, iteration: int) -> str:
        seg = run.segment
        total = self.budget.iterations
        lines = [
            f"This is iteration {iteration}{f' of {total}' if total else ''}.",
            f"Objective: {self.judge.gate} ({self.direction.value} is better)."
            if self.judge.scored
            else "Task lane: every completed turn is kept.",
        ]
        if self.judge.scored:
            lines.append(f"Baseline score: {seg.baseline_score}; best so far: {seg.best.score}.")
        for row in run.rows[-5:]:
            lines.append(f"- iteration {row['iter']}: {row['verdict']}, score {row['score']} ({row['note']})")
        return "\n".join(lines)

    def render_prompt(self, run: Run, iteration: int, steer: str) -> str:
        return prompts.render(
            self.method_template, goal=self.goal, status=self.status_text(run, iteration), steer=steer
        )

    def propose(self, run: Run, iteration: int) -> TurnResult:
        steer = self.gates.take_steer()
        text = self.render_prompt(run, iteration, steer)
        prompt_file = self.paths.private_dir / "prompt.md"
        write_atomic(prompt_file, text.encode("utf-8"), mode=0o600, durable=False)
        env = dict(self.agent_env)
        env["CRUCIBLE_PROMPT_FILE"] = str(prompt_file)
        env["CRUCIBLE_ITERATION"] = str(iteration)
        env["CRUCIBLE_WORKSPACE"] = str(self.paths.workspace)
        if run.segment.regime:
            env["CRUCIBLE_REGIME"] = run.segment.regime
        agent = self.loaded.manifest.agent
        turn = Turn(
            iteration=iteration,
            prompt=text,
            workspace=self.paths.workspace,
            env=env,
            deadline_seconds=self.options.turn_timeout or agent.turn_timeout or DEFAULT_TURN_TIMEOUT,
            emit=lambda kind, fields: self.log.emit(kind, iter=iteration, **fields),
            model=self.options.model or agent.model,
            effort=agent.effort,
            session=agent.session,
        )
        self.step("propose", iteration)
        if steer:
            # "applied" means delivered: the prompt carrying it is handed to the agent now
            self.log.emit("steer", iter=iteration, text=steer, status="applied")
            self.gates.steer_delivered(iteration)
        with self._interruptible():
            result = self.backend.run_turn(turn)
        self.log.emit(
            "turn",
            iter=iteration,
            ok=result.ok,
            failure=result.failure.value if result.failure else None,
            cost=result.cost_usd,
            note=result.note,
        )
        return result

    def measure(self, run: Run, iteration: int) -> Reading:
        refreshed = refresh_frozen(self.loaded.injects, self.paths.workspace)
        if refreshed and iteration > 0:
            self.note(f"re-copied frozen injects the candidate had changed: {', '.join(refreshed)}", "warn")
        self.step("measure", iteration)
        with self._interruptible():
            return self.judge.measure(measure_context(run, iteration))

    @contextlib.contextmanager
    def _interruptible(self) -> Iterator[None]:
        self.gates.interruptible = True
        try:
            self.gates.check_abort()
            yield
        finally:
            self.gates.interruptible = False


def agent_environment(base: dict[str, str], loaded: LoadedManifest) -> dict[str, str]:
    """The agent process env: the engine's env plus [agent].env (which reaches the agent only)."""
    env = dict(base)
    env.update(loaded.manifest.agent.env)
    return env


def engine_environment() -> dict[str, str]:
    """The env contract commands get: the engine's own, minus crucible-internal variables."""
    return {k: v for k, v in os.environ.items() if not k.startswith("CRUCIBLE_TEST_")}
