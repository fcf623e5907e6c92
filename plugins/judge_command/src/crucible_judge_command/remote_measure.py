"""The judge's measure carried out by a task runner, when the judge needs what this machine lacks.

A judge may declare the capability its measure needs (`[judge].needs = "gpu"` for the command
judge). When the run does not provide it here (`crucible run --cap gpu`), core opens the task
runners the manifest's `[deploy]` profile configures (the Kubernetes Job runner, say) and asks
this plugin for a measure on one of them. The measure is one task attempt of a kind that only
runs a shell command, so the runner ships the candidate workspace, runs the judge's command
there and hands back its output and exit code; the judge reads them exactly as it reads a local
run.

Failures of the runner's own machinery (a pod evicted, the API unreachable) are not verdicts
on the candidate: the measure is tried again, a bounded number of times, and then reads as
broken. An operator abort or a second Ctrl-C during a remote measure cancels the runner, so
nothing is left running on the cluster.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

import attrs

from crucible_core.api import (
    Attempt,
    Completed,
    Judge,
    MeasureContext,
    Outcome,
    Reading,
    ShellStdin,
    Task,
    TaskContext,
    TaskKindSpec,
    TaskRunner,
)

MEASURE_TASK = "measure"
# Transport failures tried again before the measure reads as broken (an eviction, an API hiccup).
TRANSPORT_RETRIES = 2


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


def measure_task(needs: str, timeout: float, retries: int = TRANSPORT_RETRIES) -> Task:
    """The measure as the task a runner is asked to run."""
    return Task(
        name=MEASURE_TASK,
        kind=MEASURE_TASK,
        fields=MeasureFields(),
        needs=needs,
        retries=retries,
        timeout=timeout,
    )


def measure_on_runners(
    judge: Judge, needs: str, runners: tuple[TaskRunner, ...], workspace: Path, timeout: float
) -> RemoteMeasure | str:
    """A RemoteMeasure on the first runner that serves `needs` and takes the measure, or why none does."""
    task = measure_task(needs, timeout)
    refusals: list[str] = []
    for runner in runners:
        if needs not in runner.provides():
            refusals.append(f"{runner.name} serves only {', '.join(sorted(runner.provides())) or 'nothing'}")
        elif (refusal := runner.refuses(task, MEASURE_KIND)) is not None:
            refusals.append(f"{runner.name} does not take it: {refusal}")
        else:
            return RemoteMeasure(runner, judge, needs, workspace, timeout)
    return "; ".join(refusals)


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

    @property
    def where(self) -> str:
        return self.runner.name

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
