"""Run lifecycle hooks: what plugins hear at run start, around each agent turn, and at run end.

Every kind of run fires them through the session (crucible_core/session/). Order for one
process of a loop (a resume is a new process and starts again at run start):

    setup (workspace, identity, baseline snapshot) or resume recovery
    crucible_run_start
    baseline measure (when owed)
    per iteration: crucible_before_turn -> agent turn -> crucible_after_turn -> measure -> keep/discard
                   (a keep that made a commit: the declared artifacts collected, crucible_commit_kept)
    crucible_run_end (always, once, when run start was reached; the artifacts collected again first)

A playbook fires run start once its workspace and identity are ready and before any task is
dispatched, and the turn hooks around each agent task; a plan file fires run start before
dispatch. docs/plugins.md draws all three.

A before-turn implementation may instead raise TurnUnavailable: that turn alone fails as a
transport failure (a run service it needs is not ready), and the loop retries it.

Run start and before turn may refuse: an exception there ends the run as an error naming the
plugin (a plugin that provides something the run relies on, such as a tool server, must not
be skipped silently). After turn, commit kept and run end only observe: an exception there is
noted and the remaining plugins are still called.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from crucible_core.contract.records import value_methods
from crucible_core.errors import RunFailed, UncoveredGrant
from crucible_core.plugins import HookFailed, implementer

if TYPE_CHECKING:
    from crucible_core.artifacts import Collected
    from crucible_core.broker.declaration import Disclosure
    from crucible_core.broker.service import TurnBroker
    from crucible_core.manifest.loader import LoadedManifest
    from crucible_core.plugins import Plugins
    from crucible_core.protocols import Publisher, Turn, TurnResult
    from crucible_core.run.artifact_collection import ArtifactCollection
    from crucible_core.services.runtime import ServiceForward, ServiceRuntime

# Environment variables the engine sets for every turn; a plugin's additions never replace them.
_ENGINE_ENV_PREFIX = "CRUCIBLE_"


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class RunContext:
    """What every lifecycle hook is told about the run."""

    # The run's manifest; None for a plan file (`crucible plan run`), which has none.
    manifest: LoadedManifest | None
    workspace: Path
    state_dir: Path
    private_dir: Path  # mode-0700 engine state; a plugin may keep its own files in a subdirectory
    run_id: str  # stable across resumes of one recorded run
    resumed: bool  # this process continues a recorded run
    # The run's broker (tools, per-turn grants, the output mediation point: `admit`), from the
    # plugin that provides one (crucible_open_broker); None when none is installed, and in a run
    # with no broker (a playbook, a plan file).
    broker: TurnBroker | None = None
    # The run's declared services (started lazily, stopped at run end); None when none are declared.
    services: ServiceRuntime | None = None
    # Which kind of run this is: "loop", "playbook" or "plan" (a plan file).
    lane: str = attrs.field(default="loop", kw_only=True)
    # note(text, level): a note in the session log ("info" or "warn"), for what a plugin did or
    # the trouble it had that must not end the run.
    note: Callable[[str, str], None] = attrs.field(default=lambda text, level: None, kw_only=True, eq=False)
    # The environment the engine's own commands get (service secrets left out): where a forge
    # credential for a publisher lives, never the agent's.
    engine_env: Mapping[str, str] = attrs.field(factory=dict, kw_only=True)
    # The publisher `[publish].forge` names, resolved before the run (None without [publish]):
    # publish-on-keep (crucible-plugin-publish-github) publishes the run's kept commits through it.
    publisher: Publisher | None = attrs.field(default=None, kw_only=True)
    # emit(event): one wire event into the session log (SessionLog.emit, safe from any thread),
    # for a plugin's own record of what it did (publish-on-keep's `pr_links`).
    emit: Callable[[Any], object] = attrs.field(default=lambda event: None, kw_only=True, eq=False)

    @property
    def session_log(self) -> Path:
        return self.state_dir / "session.jsonl"


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class TurnContext:
    run: RunContext
    iteration: int  # the loop's iteration; 0 for a playbook's agent task
    task: str | None = attrs.field(default=None, kw_only=True)  # the playbook task the turn runs


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class TurnAdditions:
    """What a crucible_before_turn implementation may add to the coming turn."""

    mcp_servers: Mapping[str, Any] = attrs.field(factory=dict)  # name -> server config (Turn.mcp_servers)
    env: Mapping[str, str] = attrs.field(factory=dict)  # extra agent environment for this turn
    # Run services the turn reaches (their forward's URL, bearer and handoff enter its env).
    services: tuple[ServiceForward, ...] = ()
    # The distribution whose crucible_before_turn built this value (pluggy returns results
    # without their owners), so a note or a refusal can name it.
    origin: str = attrs.field(factory=lambda: implementer() or "a plugin", kw_only=True)


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class KeptCommit:
    """A commit the loop kept: what crucible_commit_kept is told."""

    run: RunContext
    iteration: int  # the iteration that kept it (a wide round's winner: the round's iteration)
    sha: str
    summary: str  # the measure's note for the kept reading
    # The [[workspace.artifact]] files as they stood at this keep (None when none are declared):
    # `crucible_core.artifacts.embed_markdown` renders the PR body's sections, `record_files` the record's.
    artifacts: Collected | None = attrs.field(default=None, kw_only=True)


class TurnUnavailable(Exception):
    """Raised by a crucible_before_turn implementation that cannot give this turn what it needs now
    (a service that is not ready or has exited): the turn fails as a transport failure, retried
    under the loop's bound, instead of the run ending."""


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class RunEnd:
    run: RunContext
    # the shutdown outcome: finished, solved, budget, complete, stopped, escalated, stalled, error
    outcome: str
    reason: str
    iterations: int  # the last completed iteration (a playbook's or a plan's one pass counts as 1)
    artifacts: Collected | None = attrs.field(default=None, kw_only=True)  # as they stand at the end


@value_methods
@attrs.define(repr=False, eq=False)
class Lifecycle:
    """Calls the lifecycle hooks of every plugin for one run, one implementation at a time."""

    plugins: Plugins
    context: RunContext
    note: Callable[[str], None]  # a warning note in the session log
    # The run's capability disclosure: env a plugin adds to a turn must be covered by it.
    # None only where no declaration was resolved (unit tests of the hook plumbing).
    disclosure: Disclosure | None = None
    # The declared artifacts, collected before a keep and the run end are told (None: none declared).
    artifacts: ArtifactCollection | None = None
    started: bool = False
    ended: bool = False

    def run_start(self) -> None:
        self.started = True
        try:
            self.plugins.call("crucible_run_start", context=self.context)
        except HookFailed as failed:
            raise _refusal(failed) from failed.error

    def before_turn(self, turn: Turn, task: str | None = None) -> Turn:
        """The turn with every plugin's additions; a server name two plugins add keeps the first.

        `task` names the playbook task the turn runs (None for the loop's turns)."""
        if self.context.broker is not None:
            self.context.broker.open_turn(turn.iteration)  # grants last until after_turn
        try:
            return self._with_additions(turn, task)
        except BaseException:
            if self.context.broker is not None:
                self.context.broker.close_turn()  # the turn never starts: grant nothing
            raise

    def _with_additions(self, turn: Turn, task: str | None) -> Turn:
        context = TurnContext(self.context, turn.iteration, task=task)
        try:
            results = self.plugins.call("crucible_before_turn", context=context)
        except HookFailed as failed:
            if isinstance(failed.error, TurnUnavailable):
                raise failed.error from None
            raise _refusal(failed) from failed.error
        if not results:
            return turn  # no plugin adds anything (the usual turn): the turn as it was built
        servers = dict(turn.mcp_servers)
        env = dict(turn.env)
        services = list(turn.services)
        for added in results:  # pluggy's order, each plugin's None already left out
            if not isinstance(added, TurnAdditions):
                raise RunFailed(
                    f"a plugin's crucible_before_turn returned {type(added).__name__}, not TurnAdditions"
                )
            for name, config in added.mcp_servers.items():
                if name in servers:
                    self.note(
                        f"{_named(added.origin)} added MCP server {name!r}, which the turn already has; kept the first"
                    )
                    continue
                servers[name] = config
            for key, value in added.env.items():
                if key.startswith(_ENGINE_ENV_PREFIX):
                    self.note(
                        f"{_named(added.origin)} may not set {key} (the engine owns CRUCIBLE_*); ignored"
                    )
                    continue
                self._refuse_undisclosed(added.origin, key)
                env[key] = value
            for forward in added.services:
                if any(known.service == forward.service for known in services):
                    continue
                services.append(forward)
                env.update(forward.env())  # the engine's own variables for a service it runs
        return attrs.evolve(turn, mcp_servers=servers, env=env, services=tuple(services))

    def services_lost(self, turn: Turn) -> list[str]:
        """Services the turn reached that are no longer running once it ended (a transport failure)."""
        runtime = self.context.services
        if runtime is None:
            return []
        return [f.service for f in turn.services if not runtime.still_up(f"service.{f.service}")]

    def _refuse_undisclosed(self, origin: str, name: str) -> None:
        """A credential a plugin slips into the agent's environment is a grant like [agent].env:
        one the disclosure does not cover ends the run before the turn starts (C-CAPABILITY-DISCLOSURE)."""
        if self.disclosure is None:
            return
        missing = self.disclosure.uncovered_env(name)
        if missing is not None:
            raise UncoveredGrant(
                f"{_named(origin)} adds {name} to the agent's environment in crucible_before_turn, "
                f"but the run's capability disclosure does not cover it ({missing})",
                hint="disclose it in the manifest (see docs/broker.md, Disclosure), or remove the plugin",
            )

    def after_turn(self, turn: Turn, result: TurnResult | None, task: str | None = None) -> None:
        """result is None when the turn was interrupted (an abort) before it returned."""
        context = TurnContext(self.context, turn.iteration, task=task)
        if self.context.broker is not None:
            self.context.broker.close_turn()
        self._observe("crucible_after_turn", context=context, result=result)

    def commit_kept(self, iteration: int, sha: str, summary: str) -> None:
        collected = self.artifacts.collect(iteration) if self.artifacts is not None else None
        kept = KeptCommit(self.context, iteration, sha, summary, artifacts=collected)
        self._observe("crucible_commit_kept", kept=kept)

    def run_end(self, outcome: str, reason: str, iterations: int) -> None:
        if not self.started or self.ended:
            return
        self.ended = True
        collected = self.artifacts.collect(iterations) if self.artifacts is not None else None
        end = RunEnd(self.context, outcome, reason, iterations, artifacts=collected)
        self._observe("crucible_run_end", end=end)

    def _observe(self, hook: str, **kwargs: Any) -> None:
        for fault in self.plugins.observe(hook, **kwargs):
            self.note(fault)


def _named(origin: str) -> str:
    return origin if origin == "a plugin" else f"plugin {origin}"


def _refusal(failed: HookFailed) -> RunFailed:
    error = failed.error
    return RunFailed(
        f"plugin {failed.owner} refused the run in {failed.hook}: {type(error).__name__}: {error}"
    )
