"""The task runners a run opens, and the events they say before the run's log is open.

A loop run opens the runners its manifest's `[deploy]` section configures when something of the
run may need them: an authored graph's tasks, the round before the deep loop, or the judge's
measure when the judge needs (`[judge].needs`) a capability this machine lacks. That measure is
carried out on a runner by a RemoteMeasure a plugin makes (the `crucible_register_remote_measures`
hook; crucible-plugin-judge-command's in the standard set).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs

from crucible_core.contract import wire
from crucible_core.contract.records import value_methods
from crucible_core.errors import CapabilityUnserved
from crucible_core.manifest.loader import LoadedManifest
from crucible_core.plan.runners import (
    RemoteMeasure,
    RemoteMeasureFactory,
    TaskRunner,
    TaskRunnerContext,
    open_task_runners,
)
from crucible_core.protocols import Judge, judge_needs
from crucible_core.registry import provider_of

# The measure task's recorded deadline when [judge] sets none (the judge enforces its own).
DEFAULT_MEASURE_TIMEOUT = 3600.0


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


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
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
    made = remote_measure_on(plugins, judge, needs, opened.runners, workspace, timeout)
    if not isinstance(made, str):
        return attrs.evolve(opened, measure=made)
    opened.close()
    raise CapabilityUnserved(
        f"the judge needs {needs!r}, and no task runner can measure there: {made}",
        hint=f"list {needs!r} in the deploy profile's [tasks].capabilities, or pass --cap {needs}",
    )


def remote_measure_on(
    plugins: Any, judge: Judge, needs: str, runners: tuple[TaskRunner, ...], workspace: Path, timeout: float
) -> RemoteMeasure | str:
    """The first RemoteMeasure an installed factory makes on `runners`, or why none was made."""
    if not runners:
        return "no installed plugin runs tasks for [deploy] (see `crucible plugins`)"
    factories = plugins.registry("remote measure").entries
    if not factories:
        provider = provider_of("remote measure", "task-runner")
        return f"no installed plugin measures through a task runner (pip install {provider})"
    refusals: list[str] = []
    for name in sorted(factories):
        factory: RemoteMeasureFactory = factories[name].value
        made = factory(judge, needs, runners, workspace, timeout)
        if not isinstance(made, str):
            return made
        refusals.append(made)
    return "; ".join(refusal for refusal in refusals if refusal) or "no task runner takes it"
