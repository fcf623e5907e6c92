"""An Engine built in one step from its parts, with its gates bound to the loop.

The loop lane builds its engine here, and so does a unit test with in-memory drivers: the same
wiring either way, nothing assigned to the engine once this returns, and no module of the run
shell imports one that imports it back. The two parts that need the engine itself (the broker
reads its gates and redactor, the lifecycle hands turns the broker) are given as functions of the
engine and called here, in that order.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from crucible_core.control.inbox import Inbox
from crucible_core.control.ledger import Ledger
from crucible_core.manifest.loader import LoadedManifest
from crucible_core.manifest.paths import RunPaths
from crucible_core.plan.runners import RemoteMeasure, TaskRunner
from crucible_core.protocols import AgentBackend, Judge, World
from crucible_core.redact import Redactor
from crucible_core.run.budget import Budget
from crucible_core.run.drivers import DriverChoice, Drivers
from crucible_core.run.engine import Engine, RunOptions
from crucible_core.run.gates import Gates
from crucible_core.run.loop import reject, run_baseline
from crucible_core.run.prompt import DEFAULT_METHOD
from crucible_core.session_log import SessionLog

# [preflight]'s runner and the services' resolution load only for a manifest that has them.
if TYPE_CHECKING:
    from crucible_core.broker.declaration import Declaration
    from crucible_core.broker.service import TurnBroker
    from crucible_core.run.lifecycle import Lifecycle
    from crucible_core.run.preflight import Preflight
    from crucible_core.run.signals import AgentSignals
    from crucible_core.run.workflow_iteration import AuthoredGraph
    from crucible_core.services.resolve import Resolution


def build_engine(
    *,
    loaded: LoadedManifest,
    paths: RunPaths,
    log: SessionLog,
    budget: Budget,
    drivers: Drivers | None = None,
    world: World | None = None,
    judge: Judge | None = None,
    backend: AgentBackend | None = None,
    options: RunOptions | None = None,
    redactor: Redactor | None = None,
    agent_env: dict[str, str] | None = None,
    goal: str | None = None,
    method_template: str = DEFAULT_METHOD,
    now: Callable[[], float] = time.monotonic,
    preflight: Preflight | None = None,
    workflow: AuthoredGraph | None = None,
    caps: frozenset[str] = frozenset(),
    task_runners: tuple[TaskRunner, ...] = (),
    remote_measure: RemoteMeasure | None = None,
    service_resolution: Resolution | None = None,
    provenance: str | None = None,
    signals: tuple[AgentSignals, ...] = (),
    inbox: Inbox | None = None,
    ledger: Ledger | None = None,
    max_park: float | None = None,
    state_guards: Sequence[Callable[[], str | None]] = (),
    broker: Callable[[Engine], TurnBroker | None] | None = None,
    declaration: Declaration | None = None,
    lifecycle: Callable[[Engine], Lifecycle] | None = None,
) -> Engine:
    """The engine of one run: its drivers (built, or world + judge + backend given), log, budget,
    and every collaborator the run has (none of them is required by a unit test).

    The gates get the two loop operations they need (re-baseline after a re-scope, discard an
    escalated candidate) as functions bound to this engine.
    """
    if drivers is None:
        if world is None or judge is None or backend is None:
            raise TypeError("build_engine needs drivers, or a world, a judge and a backend")
        m = loaded.manifest
        # given drivers, not registry names: the choice only labels them (no plugin lookup)
        choice = DriverChoice(
            world=loaded.world_kind, judge=m.judge_kind(), backend=m.agent.backend, harness=m.agent.harness
        )
        drivers = Drivers(world=world, judge=judge, backend=backend, choice=choice)
    engine = Engine(
        loaded=loaded,
        paths=paths,
        drivers=drivers,
        log=log,
        budget=budget,
        options=options or RunOptions(),
        redactor=redactor or Redactor(),
        agent_env=dict(agent_env or {}),
        goal=goal if goal is not None else loaded.goal_text(),
        method_template=method_template,
        now=now,
        preflight=preflight,
        state_guards=list(state_guards),
        workflow=workflow,
        service_resolution=service_resolution,
        provenance=provenance,
        signals=signals,
        remote_measure=remote_measure,
        caps=caps,
        task_runners=task_runners,
    )
    engine.gates = Gates(
        engine,
        rebaseline=lambda run: run_baseline(engine, run),
        discard=lambda run, iteration, why: reject(engine, run, iteration, why),
        inbox=inbox,
        ledger=ledger,
        max_park=max_park,
    )
    if remote_measure is not None:
        remote_measure.note = engine.note  # its retries are the run's notes
    engine.declaration = declaration
    if broker is not None:
        engine.broker = broker(engine)
    if lifecycle is not None:
        engine.lifecycle = lifecycle(engine)
    return engine
