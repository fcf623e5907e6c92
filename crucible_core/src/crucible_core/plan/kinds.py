"""What a task kind is: its own fields, its rules, and the function that runs one attempt.

Kinds live in a registry filled by the `crucible_register_task_kinds` hook, so a plugin can add
one. A kind's `run` is a plain Python callable: a subprocess kind calls the supervisor, an
in-process kind (a reducer, an engine operation) computes its result directly.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import attrs

from crucible_core.contract.records import value_methods

if TYPE_CHECKING:  # annotations only: registering a task kind must not load the Protocols
    from crucible_core.plan.ir import Task
    from crucible_core.protocols import AgentBackend, CommandShell, Turn, TurnResult

# Where an agent task's turn writes its JSON result, in the root the task ran in (a playbook's
# workspace memory never commits it).
RESULT_FILE = "PLAN_TASK_RESULT.json"


class Outcome(enum.StrEnum):
    """How one attempt ended, before the executor settles the task."""

    PASS = "pass"
    FAIL = "fail"  # a measured failure: never retried
    TRANSPORT = "transport"  # could not be carried out (spawn, sandbox, ...): retried, bounded
    SKIPPED = "skipped"  # the task declared it had nothing to do


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class Attempt:
    outcome: Outcome
    output: dict[str, Any] | None = None
    note: str = ""
    cost_usd: float = 0.0
    transport: str = ""  # gateway/sandbox/agent/provider/workspace/command/other
    metric: float | None = None


class EngineOperations(Protocol):
    """What a run that owns a World and a frozen Judge lends to engine tasks."""

    def run_operation(self, op: str, context: TaskContext) -> Attempt: ...


class TurnHooks(Protocol):
    """The plugins' turn hooks around an agent task's turn (run/lifecycle.py's Lifecycle); `task`
    names the task. before_turn may raise TurnUnavailable: a transport failure, retried."""

    def before_turn(self, turn: Turn, task: str | None = None) -> Turn: ...

    def after_turn(self, turn: Turn, result: TurnResult | None, task: str | None = None) -> None: ...


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class AgentTurns:
    """What a run lends to agent tasks: its backend (asked on first use, so a graph with no agent
    task never builds one), the values only the agent sees ([agent].env), the scored loop's
    iteration (0 in a playbook), and the turn hooks (a playbook's lifecycle; a scored workflow's
    agent tasks run beside the engine's own turn and call none)."""

    backend: Callable[[], AgentBackend]
    extra_env: Mapping[str, str] = attrs.field(factory=dict)
    iteration: int = 0
    hooks: TurnHooks | None = None
    # the engine's own credentials (crucible_engine_credentials): left out of the turn's environment
    withheld: frozenset[str] = frozenset()


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class TaskContext:
    """Everything one attempt may read; built by the executor for every attempt."""

    task: Task
    workdir: Path  # the shared workspace or the task's disposable copy
    env: Mapping[str, str]  # base environment, already carrying CRUCIBLE_INPUTS / CRUCIBLE_TASK
    inputs: Mapping[str, Any]
    timeout: float
    agent_cmd: str | None = None
    engine: EngineOperations | None = None
    # A manifest's real backend and harness for agent tasks (None: --agent-cmd).
    agent: AgentTurns | None = None
    # MCP servers an agent turn of this task is given (a needed MCP service as "service.<name>").
    mcp_servers: Mapping[str, Any] = attrs.field(factory=dict)
    # Runs a kind's shell command somewhere else (a task runner's); None: here, under the supervisor.
    shell: CommandShell | None = None


class ServiceGate(Protocol):
    """What the executor asks of the run's services (crucible_core/services/runtime.py implements it).

    provides: capabilities ("service.<name>") that resolved available before any dispatch;
    unavailable: capability -> why not (the unattested tool or ungranted secret, by name);
    reach: start the service if needed and wait until ready, then (env, MCP servers) for one
      attempt of a task that needs it, or a note making that attempt a transport failure;
    still_up: whether the instance the attempt used is still running once it finished;
    one_at_a_time: the tool serves one client at a time, so two needing tasks never overlap.
    """

    def provides(self) -> frozenset[str]: ...

    def unavailable(self) -> Mapping[str, str]: ...

    def reach(self, capability: str, task: str) -> tuple[dict[str, str], dict[str, Any]] | str: ...

    def still_up(self, capability: str) -> bool: ...

    def one_at_a_time(self, capability: str) -> bool: ...


RunFunction = Callable[[TaskContext], Attempt]


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class TaskKindSpec:
    """One registered kind.

    fields: the attrs class the kind's own TOML keys structure into (strict: unknown keys fail).
    exclusive: the task holds the shared workspace alone while it runs (agent turns, engine
      operations); other kinds share it and run concurrently up to the executor's limit.
    may_emit: whether `emits` may be declared (reducers and engine tasks define their output).
    reads_score: each dependency's output must carry a numeric `score` (validated via emits).
    engine: admitted only when the run owns a World and a frozen Judge.
    """

    name: str
    fields: type
    run: RunFunction
    exclusive: bool = False
    may_emit: bool = True
    reads_score: bool = False
    engine: bool = False
    allows_session: bool = False
    allows_settled_join: bool = True
    needs_dependencies: bool = False
    describe: str = ""
    # The kind's own rules on a task's fields, given the plan's tasks by name: one problem each.
    field_problems: Callable[[Task, Mapping[str, Task]], list[str]] | None = None
    # Its attempts only run a shell command through TaskContext.shell, so a task runner may
    # carry them out elsewhere (command, evaluate, a wide round's proposal).
    remote: bool = False
    # Its attempts judge the workdir as it stands now (a candidate): a runner must carry the
    # workdir itself there, never a copy baked into an image beforehand.
    live_workdir: bool = False
    # Its command edits the workspace and the kind reads the result there afterwards (a wide
    # proposal's fork is captured as a diff): a runner that takes it must bring the workspace
    # the command left back (CommandShell's returns_workspace), or refuse it.
    returns_workspace: bool = False


Register = Callable[[str, TaskKindSpec], None]
