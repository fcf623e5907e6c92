"""The engine: one run's drivers, log and budget, and the operations the loop calls (propose, measure, ...)."""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from crucible_core.broker.declaration import BROKER_DISTRIBUTION, Declaration
from crucible_core.broker.service import TurnBroker
from crucible_core.contract import agent_wire, wire
from crucible_core.contract.change_evidence import NO_EVIDENCE, ChangeEvidence, bounded_diff
from crucible_core.contract.noise import combine
from crucible_core.contract.plain_text import plain
from crucible_core.contract.reading import Direction, Reading
from crucible_core.errors import CrucibleError, RunFailed
from crucible_core.manifest.loader import LoadedManifest
from crucible_core.manifest.paths import RunPaths
from crucible_core.plan.runners import RemoteMeasure, TaskRunner
from crucible_core.protocols import AgentBackend, FailureClass, Judge, Turn, TurnResult, World
from crucible_core.redact import Redactor
from crucible_core.run import prompt as prompts
from crucible_core.run.agent_output import TurnOutputCap
from crucible_core.run.budget import Budget
from crucible_core.run.context import LoopExit, Run, measure_context
from crucible_core.run.drivers import Drivers
from crucible_core.run.gates import Gates
from crucible_core.run.injects import Verified, refresh_frozen
from crucible_core.run.lifecycle import Lifecycle, TurnUnavailable
from crucible_core.run.signals import AgentSignals, SignalContext
from crucible_core.session_log import SessionLog
from crucible_core.workspace_files import OwnedFile

if TYPE_CHECKING:
    from pathlib import Path

    from crucible_core.run.preflight import Preflight  # loaded where a manifest has [preflight]
    from crucible_core.run.workflow_iteration import AuthoredGraph
    from crucible_core.services.resolve import Resolution  # loaded where a run declares services

DEFAULT_TURN_TIMEOUT = 3600.0


@attrs.frozen
class RunOptions:
    no_early_stop: bool = False
    harness: str | None = None
    model: str | None = None
    turn_timeout: float | None = None
    wide: int | None = None  # --wide N: overrides [search].wide
    wide_keep: int | None = None  # --wide-keep K: overrides [search].policy_k


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
    # Unbound until run.assemble.build_engine binds them to the loop operations.
    gates: Gates = attrs.field(default=attrs.Factory(Gates, takes_self=True))
    now: Callable[[], float] = time.monotonic
    lifecycle: Lifecycle | None = None  # plugins' turn hooks; None in tests that build an engine bare
    preflight: Preflight | None = None  # [preflight] rungs; None when the manifest has none
    # Each puts back one engine file in the state directory and says what it did (None: intact).
    state_guards: list[Callable[[], str | None]] = attrs.field(factory=list)
    broker: TurnBroker | None = None  # the run's broker: its tools, bounds and disclosure reach the prompt
    # The run's resolved declaration: the prompt states it even when no broker plugin is installed.
    declaration: Declaration | None = None
    # The pack's authored scored graph (workflow.star or [workflow]); None runs the built-in one.
    workflow: AuthoredGraph | None = None
    # The run's resolved services (this process's catalog): the run identity covers each one.
    service_resolution: Resolution | None = None
    # What the manifest's directory was copied from (a domain pack): the run identity covers it.
    provenance: str | None = None
    # What plugins read of the agent's asks for a human (crucible_agent_signals), at the gates.
    signals: tuple[AgentSignals, ...] = ()
    # The judge's measure carried out by a task runner ([judge].needs unprovided here); None: here.
    remote_measure: RemoteMeasure | None = None
    caps: frozenset[str] = frozenset()  # --cap: what this machine provides to an authored graph's tasks
    task_runners: tuple[TaskRunner, ...] = ()  # [deploy]'s runners, for an authored graph's tasks

    # The turn's prompt copy for scripted proposers, rewritten in place each turn and emptied
    # after it (workspace_files.OwnedFile: making and removing a file each turn cost 0.2 to 0.3 ms).
    _prompt_copy: OwnedFile | None = attrs.field(default=None, init=False)
    # The frozen injects' copies found equal to their sources, by status (run/injects.py): read
    # again only once either file was touched.
    _verified_injects: Verified = attrs.field(factory=dict, init=False)
    _signal_context: SignalContext | None = attrs.field(default=None, init=False)

    def __attrs_post_init__(self) -> None:
        self.drivers.world_notes.connect(lambda text: self.note(text, level="warn"))

    @property
    def signal_context(self) -> SignalContext:
        """What an AgentSignals reads the agent's asks with: the run's paths and its redaction
        (made again only when either was replaced; asked for several times per iteration)."""
        known = self._signal_context
        if known is None or known.paths is not self.paths or known.redact != self.redactor.text:
            known = self._signal_context = SignalContext(self.paths, self.redactor.text)
        return known

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
        self.log.emit(wire.Phase(phase=phase, iter=iteration))
        self.gates.inbox.publish(phase=phase, iter=iteration)

    def step(self, step: str, iteration: int) -> None:
        """Finer than a phase: which operation of an iteration is under way (resume classifies on it).

        Step boundaries are also where an abort that arrived between children takes effect.
        """
        self.gates.check_abort()
        self.log.emit(wire.Step(step=step, iter=iteration))
        self.gates.inbox.publish(step=step)

    def emit_segment(self, run: Run, *, reason: str) -> None:
        seg = run.segment
        self.log.emit(
            wire.Segment(
                fingerprint=seg.fingerprint,
                baseline_score=seg.baseline_score,
                regime=seg.regime,
                index=seg.index,
                snapshot=seg.best_token,
                reason=reason,
            )
        )

    def budget_event(self, run: Run, parked_now: float = 0.0) -> None:
        """The spend, time and caps in force; `parked_now` is a park still under way (not yet in run)."""
        active = run.active_seconds() - parked_now
        self.log.emit(
            wire.Budget(
                spent=round(run.spent, 6),
                elapsed_secs=int(active),
                active_s=round(active, 3),
                parked_s=round(run.parked_total + parked_now, 3),
                iterations_done=run.iteration,
                caps=self.budget.to_wire(),
            )
        )

    def note(self, text: str, level: str = "info") -> None:
        self.log.emit(wire.Note(msg=text, level=level))

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
        margin: float | None = None,
        phase: str | None = None,
        change: ChangeEvidence | None = None,
    ) -> None:
        """Record a decision. A `phase = "wide"` row (a wide-round candidate) spends no iteration
        and moves no counter; its keep still moves the best (docs/search.md). `change` is the
        candidate's diff and diffstat (describe_candidate), empty for a row with no candidate."""
        seg = run.segment
        detail = (
            json.dumps(dict(reading.detail), sort_keys=True, default=str)
            if reading and reading.detail
            else ""
        )
        row = wire.RowWire(
            iter=iteration,
            decision=verdict,
            note=note if note is not None else (reading.note if reading else ""),
            detail=detail,
            diff=change.diff if change else "",
            diffstat=change.diffstat if change else "",
            score=reading.score if reading else None,
            tiebreak=reading.tiebreak if reading else None,
            kept_snap=token,
            valid=reading.valid if reading else None,
            best=seg.best.score,
            best_tiebreak=seg.best.tiebreak,
            baseline=seg.baseline_score,
            baseline_total=seg.baseline_total,
            sha=sha,
            fingerprint=seg.fingerprint,
            cost=turn.cost_usd if turn else 0.0,
            distress=list(self.gates.take_row_notes() or []),  # only rows that carry the agent's notes
            samples=list(reading.samples) if reading else [],
            margin=margin or None,
            noise_margin=seg.noise_margin or None,
            phase=phase,
        )
        written = self.log.emit(wire.Row(row=row, solved=bool(reading.solved) if reading else False))
        decoded = wire.from_written(written)  # the redacted row, as a reader of the log sees it
        if decoded is not None and isinstance(decoded.event, wire.Row):
            row = decoded.event.row
        if iteration > 0 and phase is None:
            run.iteration = max(run.iteration, iteration)
            # a re-baseline row sits at the current iteration and spends none
            if verdict == "keep":
                run.kept += 1
            elif verdict == "discard":
                run.discarded += 1
        if sha:
            run.kept_shas.append(sha)
        run.rows.append(row)
        self.budget_event(run)
        self.publish_standing(run, solved=bool(reading and reading.solved and verdict != "discard"))

    def publish_standing(self, run: Run, *, solved: bool = False) -> None:
        """What `crucible status` shows of the run: after each row, and when a resume starts."""
        seg = run.segment
        self.gates.inbox.publish(
            iter=run.iteration,
            best=seg.best.score,
            baseline=seg.baseline_score,
            kept=run.kept,
            discarded=run.discarded,
            spent=round(run.spent, 6),
            budget=self.budget.to_wire(),
            solved=run.solved or solved,
        )

    def kept(self, iteration: int, sha: str, summary: str) -> None:
        """A keep made a new commit: plugins hear it (publish-on-keep); never ends the run."""
        if self.lifecycle is not None:
            self.lifecycle.commit_kept(iteration, sha, summary)

    def guard_state(self, after: str) -> None:
        """After a child the agent or the measure controls: put back what it removed from the
        state directory (log first, so the notes land in it); RunFailed when that is impossible."""
        damaged = self.log.restore_if_damaged()
        try:
            self.paths.ensure_state_dirs()
            repaired = [done for guard in self.state_guards if (done := guard())]
        except OSError as exc:
            raise RunFailed(
                f"the state directory {self.paths.state_dir} was damaged during the {after} and "
                f"could not be repaired: {exc}",
                hint="keep the agent out of the state directory (docs/operating.md); resume once it is fixed",
            ) from exc
        if damaged:
            repaired.insert(0, f"the session log ({damaged}) from the engine's own copy")
        if repaired:
            self.note(
                f"the state directory was tampered with during the {after}; put back: {'; '.join(repaired)}",
                level="warn",
            )

    def describe_candidate(self, base: str, *, staged: str | None = None) -> ChangeEvidence:
        """The candidate now in the workspace against kept state `base`, as a row's evidence.

        From the world's optional describe_change (the loop runs no git itself), or, given the
        token `staged` the workspace is known to hold, its optional describe_staged, which reads
        that token without staging the workspace again (the keep still stages and checks it).
        The agent wrote the diff: it is redacted whole, then cut to DIFF_CAP_BYTES, so a secret
        is never split past its pattern by the cut. Evidence is never worth a run: a world that
        cannot describe the change gives an empty diff and a note.
        """
        of_staged = getattr(self.world, "describe_staged", None) if staged is not None else None
        describe = getattr(self.world, "describe_change", None)
        try:
            if callable(of_staged):
                diff, diffstat = of_staged(base, staged)
            elif callable(describe):
                diff, diffstat = describe(base)
            else:
                return NO_EVIDENCE
        except (CrucibleError, OSError, ValueError) as exc:
            self.note(f"the candidate's diff could not be read: {exc}", level="warn")
            return NO_EVIDENCE
        return ChangeEvidence(
            diff=bounded_diff(self.redactor.text(str(diff))),
            diffstat=plain(self.redactor.text(str(diffstat))).strip(),
        )

    # -- operations the loop calls ----------------------------------------------------------
    def snapshot(self, label: str) -> str:
        """Keep the world's current state; the label (a commit message) is redacted like the log,
        because the world stores it where the agent and every later reader can see it, and made
        plain text (it carries the measure's note; `git log` prints it to a terminal)."""
        return self.world.snapshot(plain(self.redactor.text(label)))

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
        winners = [row for row in run.rows if row.phase == wire.WIDE_PHASE and "winner" in row.note]
        if winners:
            # the wide round's ranked winners seed the deep loop: the approaches that scored best
            lines.append("The wide round's best-ranked candidates (build on what worked):")
            lines += [f"- score {row.score}: {row.note}" for row in winners]
        for row in run.rows[-5:]:
            lines.append(f"- iteration {row.iter}: {row.decision}, score {row.score} ({row.note})")
        return "\n".join(lines)

    def capabilities_text(self) -> str:
        """What the prompt says the agent has: the broker's words, or the declaration's without one."""
        if self.broker is not None:
            return self.broker.prompt_text()
        if self.declaration is not None:
            return self.declaration.prompt_text(f"no broker is installed ({BROKER_DISTRIBUTION})")
        return ""

    def render_prompt(self, run: Run, iteration: int, steer: str) -> str:
        return prompts.render(
            self.method_template,
            goal=self.goal,
            status=self.status_text(run, iteration),
            steer=steer,
            capabilities=self.capabilities_text(),
        )

    def suspend_services(self, why: str) -> None:
        """The run parks: its services stop (signal, grace, kill) until a turn needs them again."""
        runtime = self.lifecycle.context.services if self.lifecycle is not None else None
        if runtime is not None:
            runtime.suspend(f"suspended: {why}")

    def propose(self, run: Run, iteration: int) -> TurnResult:
        steer = self.gates.take_steer()
        text = self.render_prompt(run, iteration, steer)
        # A redacted copy for scripted proposers, emptied after the turn: files the run writes
        # hold no secret (the agent itself gets the prompt whole, on stdin or through its harness).
        # Rewritten in place: nothing reads it before the turn starts or after it ends, so no
        # reader can see it half written.
        prompt_copy = self._prompt_copy_file()
        prompt_copy.write(self.redactor.text(text).encode("utf-8"))
        env = {"CRUCIBLE_PROMPT_FILE": str(prompt_copy.path)}
        if run.segment.regime:
            env["CRUCIBLE_REGIME"] = run.segment.regime
        turn, capped = self.agent_turn(
            iteration, text, self.paths.workspace, env, session=self.loaded.manifest.agent.session
        )
        self.step("propose", iteration)
        if steer:
            # "applied" means delivered: the prompt carrying it is handed to the agent now
            self.log.emit(wire.Steer(iter=iteration, text=steer, status="applied"))
            self.gates.steer_delivered(iteration)
        unreachable: str | None = None
        if self.lifecycle is not None:
            try:
                turn = self.lifecycle.before_turn(turn)
            except TurnUnavailable as exc:  # a run service the turn needs is not there now
                unreachable = str(exc)
        result: TurnResult | None = None
        self.log.emit(wire.AgentStart(iter=iteration))
        try:
            if unreachable is not None:
                result = TurnResult(False, FailureClass.SPAWN, note=unreachable)
            else:
                with self._interruptible():
                    result = self.backend.run_turn(turn)
                lost = self.lifecycle.services_lost(turn) if self.lifecycle is not None else []
                if lost:
                    note = f"service(s) {', '.join(lost)} exited while the turn ran"
                    result = TurnResult(False, FailureClass.SPAWN, cost_usd=result.cost_usd, note=note)
        finally:
            with contextlib.suppress(OSError):  # the agent may have taken the directory with it
                prompt_copy.empty()
            capped.finish()
            if self.lifecycle is not None:
                self.lifecycle.after_turn(turn, result)
        self.guard_state("agent turn")
        self.log.emit(wire.AgentDone())
        self.log.emit(
            wire.Turn(
                iter=iteration,
                ok=result.ok,
                failure=result.failure.value if result.failure else None,
                cost=result.cost_usd,
                note=result.note,
            )
        )
        return result

    def _prompt_copy_file(self) -> OwnedFile:
        path = self.paths.private_dir / "prompt.md"
        if self._prompt_copy is None or self._prompt_copy.path != path:
            self.close()
            self._prompt_copy = OwnedFile(path, mode=0o600)
        return self._prompt_copy

    def close(self) -> None:
        """The run is over: the prompt copy is removed, as it was made only for the turns."""
        copy, self._prompt_copy = self._prompt_copy, None
        if copy is not None:
            copy.close()
            with contextlib.suppress(OSError):
                copy.path.unlink(missing_ok=True)

    def agent_turn(
        self, iteration: int, prompt: str, workspace: Path, env: Mapping[str, str], *, session: str | None
    ) -> tuple[Turn, TurnOutputCap]:
        """A turn of the configured agent in `workspace`: the agent's environment with `env` on top,
        its deadline, model and effort, and its events written to the log through a cap whose
        `finish()` the caller calls once the turn is over (a wide round's candidates use it too)."""
        agent = self.loaded.manifest.agent
        full_env = dict(self.agent_env)
        full_env["CRUCIBLE_ITERATION"] = str(iteration)
        full_env["CRUCIBLE_WORKSPACE"] = str(workspace)
        for signals in self.signals:
            full_env.update(signals.env(self.signal_context))
        full_env.update(env)
        capped = TurnOutputCap(lambda kind, fields: self._agent_event(iteration, kind, fields))
        turn = Turn(
            iteration=iteration,
            prompt=prompt,
            workspace=workspace,
            env=full_env,
            deadline_seconds=self.options.turn_timeout or agent.turn_timeout or DEFAULT_TURN_TIMEOUT,
            emit=capped,
            model=self.options.model or agent.model,
            effort=agent.effort,
            session=session,
        )
        return turn, capped

    def _agent_event(self, iteration: int, kind: str, fields: Mapping[str, Any]) -> None:
        """A harness's agent event, written in the wire's agent vocabulary (see agent_wire.py)."""
        self.log.emit(agent_wire.to_wire(kind, fields))

    def refresh_injects(self, iteration: int) -> None:
        """Put the frozen injects back as the manifest has them, before a measure."""
        refreshed = refresh_frozen(self.loaded.injects, self.paths.workspace, self._verified_injects)
        if refreshed and iteration > 0:
            self.note(f"re-copied frozen injects the candidate had changed: {', '.join(refreshed)}", "warn")

    def measure(self, run: Run, iteration: int) -> Reading:
        """Judge the workspace as it stands (the loop refreshes the injects and stages first).

        With `[judge].repeats = N` the judge measures it N times, one after another, and the
        readings fold into one (contract/noise.py); a sample that is not scoreable ends the
        repeats early, since the candidate is then unscoreable whatever the others say.
        """
        self.step("measure", iteration)
        judge = self.loaded.manifest.judge
        repeats = judge.repeats if judge is not None and self.judge.scored else 1
        readings: list[Reading] = []
        for _ in range(repeats):
            with self._interruptible():
                context = measure_context(run, iteration)
                if self.remote_measure is not None:
                    reading = self.remote_measure.measure(context)
                else:
                    reading = self.judge.measure(context)
            self.guard_state("measure")
            readings.append(reading)
            if not reading.scoreable:
                break
        if len(readings) == 1:
            return readings[0]
        assert judge is not None
        return combine(readings, judge.statistic)

    def keep_margin(self, run: Run) -> float:
        """How much a candidate must beat the best by: `[judge].min_improvement` against the
        current best, or the baseline's measured spread (`noise = "auto"`), whichever is larger."""
        judge = self.loaded.manifest.judge
        if judge is None:
            return 0.0
        return max(judge.min_improvement.against(run.segment.best.score), run.segment.noise_margin)

    @property
    def has_candidate_rungs(self) -> bool:
        return self.preflight is not None and bool(self.preflight.section.rungs("candidate"))

    def candidate_preflight(self, iteration: int) -> str | None:
        """[preflight] candidate rungs on the staged candidate: why it is rejected, or None."""
        if self.preflight is None or not self.has_candidate_rungs:
            return None
        self.step("preflight", iteration)
        with self._interruptible():
            failure = self.preflight.first_failure("candidate")
        self.guard_state("preflight")
        return failure.describe() if failure is not None else None

    @contextlib.contextmanager
    def _interruptible(self) -> Iterator[None]:
        self.gates.interruptible = True
        try:
            self.gates.check_abort()
            yield
        finally:
            self.gates.interruptible = False


def agent_environment(
    base: dict[str, str], loaded: LoadedManifest, withheld: frozenset[str] = frozenset()
) -> dict[str, str]:
    """The agent process env: the engine's env without its own credentials, plus [agent].env
    (which reaches the agent only, and may set a withheld name on purpose)."""
    env = {k: v for k, v in base.items() if k not in withheld}
    env.update(loaded.manifest.agent.env)
    return env


def engine_credentials(plugins: Any) -> frozenset[str]:
    """The variables installed plugins hold for the engine's own writes (crucible_engine_credentials)."""
    return frozenset(str(name) for names in plugins.call("crucible_engine_credentials") for name in names)


def engine_environment() -> dict[str, str]:
    """The env contract commands get: the engine's own, minus crucible-internal variables."""
    return {k: v for k, v in os.environ.items() if not k.startswith("CRUCIBLE_TEST_")}
