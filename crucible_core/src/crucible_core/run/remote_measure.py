"""The judge's measure carried out by a task runner, when the judge needs what this machine lacks.

A judge may declare the capability its measure needs (`[judge].needs = "gpu"` for the command
judge). When the run does not provide it here (`crucible run --cap gpu`), the engine hands
each measure to a task runner that serves it (the Kubernetes Job runner, configured by the
manifest's `[deploy]` profile). The measure is one task attempt of a kind that only runs a
shell command, so the runner ships the candidate workspace, runs the judge's command there and
hands back its output and exit code; the judge reads them exactly as it reads a local run.

Failures of the runner's own machinery (a pod evicted, the API unreachable) are not verdicts
on the candidate: the measure is tried again, a bounded number of times, and then reads as
broken. An operator abort or a second Ctrl-C during a remote measure cancels the runner, so
nothing is left running on the cluster.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs

from crucible_core.contract import wire
from crucible_core.contract.reading import Reading
from crucible_core.errors import CapabilityUnserved
from crucible_core.manifest.loader import LoadedManifest
from crucible_core.plan import ir
from crucible_core.plan.kinds import Attempt, Outcome, TaskContext, TaskKindSpec
from crucible_core.plan.runners import TaskRunner, TaskRunnerContext, open_task_runners
from crucible_core.process import Completed
from crucible_core.protocols import Judge, MeasureContext, ShellStdin, judge_needs

MEASURE_TASK = "measure"
# The measure task's recorded deadline when [judge] sets none (the judge enforces its own).
DEFAULT_MEASURE_TIMEOUT = 3600.0
# Transport failures tried again before the measure reads as broken (an eviction, an API hiccup).
TRANSPORT_RETRIES = 2


class HeldEvents:
    """Events a runner emits before the run's start line is written: held, then written in order."""

    def __init__(self) -> None:
        self.held: list[wire.Event] = []
        self.emit: Callable[[wire.Event], Any] | None = None

    def __call__(self, event: wire.Event) -> None:
        if self.emit is None:
            self.held.append(event)
        else:
            self.emit(event)

    def release(self, emit: Callable[[wire.Event], Any]) -> None:
        self.emit = emit
        for event in self.held:
            emit(event)
        self.held.clear()


@attrs.frozen
class MeasureFields:
    """The measure task's own fields: none (the judge holds its command and deadline)."""


def _unrunnable(context: TaskContext) -> Attempt:  # the kind only ever runs through RemoteMeasure
    return Attempt(Outcome.FAIL, note="the measure kind runs only through the engine")


# The kind a runner sees: one shell command (remote), on the workspace as it stands (a candidate).
MEASURE_KIND = TaskKindSpec(
    name=MEASURE_TASK,
    fields=MeasureFields,
    run=_unrunnable,
    remote=True,
    live_workdir=True,
    describe="the judge's measure of the staged candidate",
)


def measure_task(needs: str, timeout: float, retries: int = TRANSPORT_RETRIES) -> ir.Task:
    """The measure as the task a runner is asked to run."""
    return ir.Task(
        name=MEASURE_TASK,
        kind=MEASURE_TASK,
        fields=MeasureFields(),
        needs=needs,
        retries=retries,
        timeout=timeout,
    )


@attrs.define
class RemoteMeasure:
    """Measures through `runner` (see the module docstring); one per run, used on the loop's thread."""

    runner: TaskRunner
    judge: Judge
    needs: str
    workspace: Path
    timeout: float
    note: Callable[[str, str], None] = lambda text, level: None
    retries: int = TRANSPORT_RETRIES
    cancelled: bool = False
    warned: bool = False  # said once that the judge ignored the shell it was lent

    def measure(self, ctx: MeasureContext) -> Reading:
        why = ""
        for attempt in range(1, self.retries + 2):
            reading, transport = self._once(ctx)
            if transport is None:
                return reading
            why = transport.removeprefix(f"{self.runner.name}: ")
            if attempt <= self.retries:
                self.note(f"measure on {self.runner.name}: {why}; trying again", "warn")
        return Reading.invalid(
            f"the measure could not be carried out on {self.runner.name} "
            f"({self.retries + 1} attempts): {why}",
            broken=True,
        )

    def _once(self, ctx: MeasureContext) -> tuple[Reading, str | None]:
        """One attempt: the judge's reading, and why the runner could not carry it out (or None)."""
        readings: list[Reading] = []
        lost: list[str] = []
        calls: list[str] = []

        def run_kind(context: TaskContext) -> Attempt:
            remote = context.shell
            assert remote is not None  # a runner always lends its shell to a remote kind

            def shell(
                command: str,
                env: Mapping[str, str],
                timeout: float,
                *,
                stdin: ShellStdin | None = None,
                returns_workspace: bool = False,
            ) -> Completed:
                calls.append(command)
                if stdin is None and not returns_workspace:  # all a measure asks for
                    done = remote(command, env, timeout)
                else:
                    done = remote(command, env, timeout, stdin=stdin, returns_workspace=returns_workspace)
                if done.spawn_error:
                    lost.append(done.spawn_error)
                return done

            readings.append(self.judge.measure(attrs.evolve(ctx, shell=shell)))
            if lost:
                return Attempt(Outcome.TRANSPORT, note=lost[-1], transport="other")
            return Attempt(Outcome.PASS)

        task = measure_task(self.needs, self.timeout, self.retries)
        context = TaskContext(task=task, workdir=self.workspace, env={}, inputs={}, timeout=self.timeout)
        try:
            attempt = self.runner.run(context, attrs.evolve(MEASURE_KIND, run=run_kind))
        except BaseException:  # an abort or a second Ctrl-C: leave nothing running on the cluster
            self.cancel()
            raise
        if attempt.outcome is Outcome.TRANSPORT:
            return Reading.invalid(attempt.note, broken=True), attempt.note or "the runner lost the attempt"
        if not readings:  # the runner refused to run the kind at all
            return Reading.invalid(attempt.note, broken=True), attempt.note or "nothing was measured"
        if not calls and not self.warned:
            # A judge declaring `needs` promises to measure through the shell it is lent.
            self.warned = True
            self.note(
                f"the judge declares needs = {self.needs!r} but did not run its measure through "
                f"the shell it was lent: it measured on this machine, not on {self.runner.name}",
                "warn",
            )
        return readings[-1], None

    def cancel(self) -> None:
        if not self.cancelled:
            self.cancelled = True
            self.runner.cancel()


@attrs.frozen
class RunRunners:
    """The task runners a loop run opened: the one measuring for the judge, and all of them for
    an authored graph's tasks. Closed when the run ends."""

    runners: tuple[TaskRunner, ...] = ()
    measure: RemoteMeasure | None = None

    def close(self) -> None:
        for runner in self.runners:
            runner.close()


def open_configured_runners(
    plugins: Any,
    loaded: LoadedManifest,
    *,
    state_dir: Path,
    env: Mapping[str, str],
    emit: Callable[[wire.Event], Any] | None = None,
    offline: bool = False,
) -> tuple[TaskRunner, ...]:
    """The task runners the manifest's `[deploy]` section configures, opened (none without one).

    `offline` opens them as probes that reach nothing (a check, a plan shown); `emit` writes their
    events to the run's log.
    """
    if loaded.manifest.deploy is None:
        return ()
    context = TaskRunnerContext(
        run_name=loaded.dir.name,
        state_dir=state_dir,
        base_dir=loaded.dir,
        deploy=loaded.deploy_settings,
        env=dict(env),
        emit=emit,
        offline=offline,
    )
    return open_task_runners(plugins, context)


def open_run_runners(
    plugins: Any,
    loaded: LoadedManifest,
    judge: Judge,
    *,
    caps: frozenset[str],
    state_dir: Path,
    workspace: Path,
    timeout: float,
    env: Mapping[str, str],
    emit: Callable[[wire.Event], Any],
    graph: bool = False,
    round_needs: str | None = None,
) -> RunRunners:
    """The runners `[deploy]` configures, opened when something of this run may need them: the
    judge's measure (its `needs` not in `caps`), with `graph` an authored graph's tasks, or the
    work of the round before the deep loop (`round_needs`, `[search].needs`, not in `caps`; the
    round decides which runner takes it: run/rounds.py).

    Refuses the run (CapabilityUnserved, exit 10) when the judge needs a capability that
    neither `--cap` nor a runner configured by the manifest's `[deploy]` section provides.
    """
    needs = judge_needs(judge)
    measured_here = needs is None or needs in caps
    deploy = loaded.manifest.deploy
    proposals_here = round_needs is None or round_needs in caps or round_needs == "any"
    if deploy is None or (measured_here and not graph and proposals_here):
        if not measured_here:
            raise CapabilityUnserved(
                f"the judge needs {needs!r}, which this run does not provide",
                hint=f"pass --cap {needs} if this machine has it, or name a deploy profile whose "
                f"[tasks].capabilities lists it in [deploy].profile (docs/kubernetes.md)",
            )
        return RunRunners()
    opened = RunRunners(open_configured_runners(plugins, loaded, state_dir=state_dir, env=env, emit=emit))
    if needs is None or measured_here:
        return opened
    task = measure_task(needs, timeout)
    refusals: list[str] = []
    for runner in opened.runners:
        if needs not in runner.provides():
            refusals.append(f"{runner.name} serves only {', '.join(sorted(runner.provides())) or 'nothing'}")
        elif (refusal := runner.refuses(task, MEASURE_KIND)) is not None:
            refusals.append(f"{runner.name} does not take it: {refusal}")
        else:
            return attrs.evolve(opened, measure=RemoteMeasure(runner, judge, needs, workspace, timeout))
    opened.close()
    why = "; ".join(refusals) or "no installed plugin runs tasks for [deploy] (see `crucible plugins`)"
    raise CapabilityUnserved(
        f"the judge needs {needs!r}, and no task runner can measure there: {why}",
        hint=f"list {needs!r} in the deploy profile's [tasks].capabilities, or pass --cap {needs}",
    )
