"""The whole extension surface of crucible: every hook a plugin may implement, in one file.

A plugin is a module named in the `crucible` entry-point group that holds `@hookimpl`
functions. Registration hooks receive a `register(name, factory)` callback; a name registered
twice is an error naming both plugins.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from pathlib import Path

    import click

    from crucible_core.broker.outputs import OutputKindSpec
    from crucible_core.broker.service import BrokerRequest, TurnBroker
    from crucible_core.broker.tools import BrokerTool
    from crucible_core.flow.model import FlowRenderer
    from crucible_core.init_templates import InitTemplate
    from crucible_core.lanes.lane import LaneSpec
    from crucible_core.plan.kinds import TaskKindSpec
    from crucible_core.plan.runners import RemoteMeasureFactory, TaskRunnerFactory
    from crucible_core.protocols import (
        BackendFactory,
        DomainPacks,
        HarnessFactory,
        JudgeFactory,
        PublisherFactory,
        ReporterFactory,
        ServiceTransport,
        TurnResult,
        WorkspaceMemoryFactory,
        WorldFactory,
    )
    from crucible_core.registry import Register
    from crucible_core.run.lifecycle import KeptCommit, RunContext, RunEnd, TurnAdditions, TurnContext
    from crucible_core.run.rounds import RoundStrategy
    from crucible_core.run.signals import AgentSignals
    from crucible_core.services.catalog import ServiceToolFactory
    from crucible_core.workflow.language import WorkflowLanguage

PROJECT = "crucible"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def crucible_register_worlds(register: Register[WorldFactory]) -> None:
    """Register World kinds by name ("git", "command"): factories taking a WorldContext."""


@hookspec
def crucible_register_judges(register: Register[JudgeFactory]) -> None:
    """Register Judge kinds by name ("command", "task"): factories taking a JudgeContext."""


@hookspec
def crucible_register_backends(register: Register[BackendFactory]) -> None:
    """Register agent backends by name ("local", "command"), the `[agent].backend` values."""


@hookspec
def crucible_register_harnesses(register: Register[HarnessFactory]) -> None:
    """Register harnesses by name ("claude", "anthropic"), the `[agent].harness` values."""


@hookspec
def crucible_register_output_kinds(register: Register[OutputKindSpec]) -> None:
    """Register mediated output kinds by name (the `[outputs]` vocabulary): an OutputKindSpec each.

    The spec carries the kind's default count and whether it addresses a target; core registers
    none (crucible-plugin-publish-github registers draft-pr, the broker plugin the rest of the
    standard vocabulary). See docs/broker.md.
    """


@hookspec
def crucible_register_broker_tools(register: Register[BrokerTool]) -> None:
    """Register tools the broker offers agent turns (mcp__crucible__<name>): a BrokerTool each.

    A tool that writes outside the run names its output kind and asks `call.admit(target)`
    before writing. crucible-plugin-broker-mcp registers request_approval and steer_inbox;
    crucible-plugin-distress registers distress and escalate.
    """


@hookspec
def crucible_register_services(register: Register[ServiceToolFactory]) -> None:
    """Register installed run-service tools by their catalog name: functions returning a ServiceTool.

    Discovery only: `crucible services list` shows them and `crucible services catalog` writes
    their catalog entries; a run starts only what the operator's catalog attests (docs/services.md).
    """


@hookspec
def crucible_register_service_transports(register: Register[ServiceTransport]) -> None:
    """Register how a catalog transport ("mcp-http", "mcp-stdio", "http") is served: ServiceTransport values.

    The engine starts the tool and mints its bearer; `serve(tool)` puts the forward in front of it
    and returns the endpoint whose `ready(timeout)` the engine probes before any task needs it.
    """


@hookspec
def crucible_register_commands(register: Register[click.Command]) -> None:
    """Register extra `crucible` CLI subcommands by name: each value is a click.Command."""


@hookspec
def crucible_register_reporters(register: Register[ReporterFactory]) -> None:
    """Register run reporters by name ("console", "headless", "jsonl"), chosen with `--ui`."""


@hookspec
def crucible_register_flow_renderers(register: Register[FlowRenderer]) -> None:
    """Register renderings of a run's flow model by output file extension ("json", "dot", "html").

    `crucible flow --out FILE` (crucible-plugin-flow-page's command) picks the one its extension
    names; each is a function from the FlowModel (already folded from the redacted log) to the
    file's text. crucible-plugin-flow-page registers json, dot, mmd and html.
    """


@hookspec
def crucible_register_packs(register: Register[Path]) -> None:
    """Register domain packs by name: each value is a directory holding a crucible.toml."""


@hookspec(firstresult=True)
def crucible_domain_packs() -> DomainPacks | None:
    """Return what carries out `--pack NAME` (copy a registered pack into ./NAME, check what it needs).

    The first plugin to return one wins (crucible-plugin-packs in the standard set); with none,
    `--pack` is refused naming that distribution.
    """


@hookspec
def crucible_session_event(event: Mapping[str, Any]) -> None:
    """Observe one session-log event, called after the event is durably written."""


@hookspec
def crucible_register_task_kinds(register: Register[TaskKindSpec]) -> None:
    """Register plan task kinds by name ("command", "top_k", "engine_propose"): TaskKindSpec values."""


@hookspec
def crucible_register_publishers(register: Register[PublisherFactory]) -> None:
    """Register publishers by name ("github"), the `[publish].forge` values: a factory of a Publisher.

    Publish-on-keep publishes the run's kept commits (one draft pull request, moved on each keep)
    through the selected publisher after the mediation point admitted one `draft-pr` write to
    `[publish].pr_repo` (docs/broker.md, Engine writes).
    """


@hookspec
def crucible_register_task_runners(register: Register[TaskRunnerFactory]) -> None:
    """Register task runners by name ("kubernetes"): factories taking a TaskRunnerContext.

    A plan run calls every factory once; one that returns a TaskRunner (not None) may run the
    run's tasks that need a capability this machine lacks (crucible_core.plan.runners).
    `plan show` calls them with `context.offline` set and only asks provides/refuses.
    """


@hookspec
def crucible_register_workspace_memories(register: Register[WorkspaceMemoryFactory]) -> None:
    """Register workspace memories by name ("git"): factories taking a WorkspaceMemoryContext.

    A playbook keeps its shared workspace's history through the one named "git" (the git world
    plugin's): it clones `[repo]` into the workspace, records the base, commits each passing
    task's changes and discards a failing one's, and puts the base back on resume.
    """


@hookspec
def crucible_register_init_templates(register: Register[InitTemplate]) -> None:
    """Register `crucible init --template NAME` starting points by name: an InitTemplate each.

    Core registers none: a template is the plugin's whose behaviour it needs ("claude", or
    "playbook", a workflow.star; "command", the agentless one, is crucible-plugin-packs').
    """


@hookspec
def crucible_register_workflow_languages(register: Register[WorkflowLanguage]) -> None:
    """Register workflow authoring languages by source suffix (".star"): a WorkflowLanguage each.

    A file `workflow<suffix>` beside a manifest is that manifest's graph; the language registered
    for the suffix reads its lane and launch parameters and compiles it to the `[workflow]` IR
    (crucible_core.workflow.language). With no language for a source's suffix, runs and checks refuse.
    """


@hookspec
def crucible_register_lanes(register: Register[LaneSpec]) -> None:
    """Register kinds of run by the workflow type that selects them ("playbook"): a LaneSpec each.

        A manifest whose effective `[workflow]` declares a type no judge scores runs through the lane
        registered under that type: the session hands its `prepare` a LaneContext before the log opens
        and drives the lane it returns through the one shell (crucible_core.lanes.lane); `crucible check`
        adds the lane's own findings. The loop is core's, and a plan file's lane comes with the command
    that runs it (SessionRequest.prepare_lane); neither is registered here;
        with no lane for the type, runs and checks refuse, naming the distribution to install.
    """


@hookspec
def crucible_register_round_strategies(register: Register[RoundStrategy]) -> None:
    """Register what runs before the deep loop when `[search]` or `--wide N` asks ("wide"): a RoundStrategy each.

    Core runs the ordinary loop, one candidate per iteration, itself; a run that asks for a round
    calls the strategy named "wide" to prepare it, refuse what it cannot use, place its work and
    run it once the baseline is measured (crucible_core.run.rounds). `settings=` names the attrs
    class `[search]` converts into; without a strategy installed, a manifest with `[search]` is
    refused naming the distribution to install.
    """


@hookspec
def crucible_register_remote_measures(register: Register[RemoteMeasureFactory]) -> None:
    """Register how a judge's measure is carried out by a task runner: a RemoteMeasureFactory each.

    When the judge needs a capability (`[judge].needs`) this run does not provide, core opens the
    task runners `[deploy]` configures and asks each factory, in name order, for a RemoteMeasure
    on one of them; the first one made measures every candidate. A factory returns a string
    saying why no runner takes the measure. Without a factory installed such a run is refused
    naming the distribution to install.
    """


@hookspec
def crucible_open_broker(request: BrokerRequest) -> TurnBroker | None:
    """Return the broker of one loop run: what serves the granted tools to its agent turns.

    Called once per run, after the declaration is resolved; at most one installed plugin answers
    (crucible-plugin-broker-mcp). Without one a run has no broker, and a manifest that asks for it
    in `[agent.broker]` is refused before it starts. See docs/broker.md.
    """


# ---------------------------------------------------------------------------------------------
# Run lifecycle (see crucible_core.run.lifecycle for the order). Each is called once per plugin, in
# pluggy's order; run start and before turn may refuse by raising, the other two only observe.


@hookspec
def crucible_run_start(context: RunContext) -> None:
    """The run's workspace is set up (or a resume recovered it) and nothing is measured yet.

    Start what the run needs (a tool server, a broker). Raising ends the run as an error.
    """


@hookspec
def crucible_before_turn(context: TurnContext) -> TurnAdditions | None:
    """An agent turn is about to start: return TurnAdditions to give it MCP servers or env.

    Raising ends the run as an error; return None to add nothing.
    """


@hookspec
def crucible_after_turn(context: TurnContext, result: TurnResult | None) -> None:
    """The agent turn is over (result is None when an abort cut it short); before it is measured.

    An exception is noted in the session log and otherwise ignored.
    """


@hookspec
def crucible_run_end(end: RunEnd) -> None:
    """The run is ending, on every path once run start was reached: stop what run start started.

    Called before the summary and shutdown events; an exception is noted and ignored.
    """


@hookspec
def crucible_agent_signals() -> AgentSignals | None:
    """Return an AgentSignals: what the agent may write to ask for a human, read at the loop's safe points.

    Every plugin's is asked (crucible_core.run.signals): its env for each turn, its notes and
    escalation after a turn, its suspend at the iteration head (parked as a block-mode approval
    wait under its handle until it no longer holds or an operator approves). Return None to add
    nothing. crucible-plugin-distress answers with `crucible distress` and `crucible escalate`.
    """


@hookspec
def crucible_engine_credentials() -> Iterable[str] | None:
    """Name the environment variables holding credentials the engine uses on its own behalf.

    A forge token a publisher pushes with, a record store's keys: the engine needs them, an agent
    turn must never see them. Every agent turn (the loop's, a wide round's, an agent task's) gets
    the engine's environment without these names, unless the manifest's `[agent].env` sets one
    itself. Measure and task commands, which the agent cannot change, keep them.
    """


@hookspec
def crucible_commit_kept(kept: KeptCommit) -> None:
    """The loop kept a new commit (an iteration's keep, or a wide round's winner): its iteration, sha
    and the measure's note, right after its row is written.

    Publish-on-keep lives here (crucible-plugin-publish-github). An exception is noted in the
    session log and otherwise ignored.
    """
