"""The small Protocols every driver obeys, and the context objects the engine hands their factories."""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import attrs

from crucible_core.contract.reading import Reading
from crucible_core.contract.records import value_methods

if TYPE_CHECKING:
    from crucible_core.manifest.models import AgentSection, JudgeSection, Manifest, WorldSection
    from crucible_core.plugins import Plugins
    from crucible_core.process import Completed
    from crucible_core.protocol_records import PublishRequest as PublishRequest
    from crucible_core.protocol_records import SandboxCommand as SandboxCommand
    from crucible_core.protocol_records import SandboxLayout as SandboxLayout
    from crucible_core.protocol_records import ServedTool as ServedTool
    from crucible_core.protocol_records import ShellStdin as ShellStdin
    from crucible_core.services.runtime import ServiceForward
    from crucible_core.shell import Shell


# ---------------------------------------------------------------------------------------------
# World: reversibility. The token is opaque to the engine; it only hands it back to restore().


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class ApplyOutcome:
    ok: bool
    note: str = ""


def _no_note(text: str) -> None:
    return None


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class WorldContext:
    """What a World factory gets. `spared` are workspace-relative paths a restore never removes.

    `private_dir`, when given, is a directory under the run's state directory that belongs to
    the world alone: the place for its own record of kept states, out of the agent's
    workspace, so a candidate that wrecks the workspace's repository cannot take kept history
    with it. `note(text)` puts a warning in the run's session log (a repair the world made).
    """

    workspace: Path
    section: WorldSection
    spared: tuple[str, ...]
    shell: Shell
    private_dir: Path | None = None
    note: Callable[[str], None] = _no_note
    settings: Any = None  # the [world] keys, as the settings class this world registered
    # For an assembled manifest (LoadedManifest.components): each component's own world, built
    # by core from the component's [world] in its directory of the workspace, in manifest order.
    parts: tuple[tuple[str, World], ...] = ()


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class Staged:
    """What stage() found: the candidate's content, named, and whether there is anything to judge."""

    token: str  # names the candidate's content: equal tokens mean a snapshot would keep the same
    unchanged: bool  # the content equals the last kept (or restored) state
    refused: str = ""  # non-empty: the candidate cannot be kept, and why (it damaged the world)


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class SourceChanges:
    """How a local [repo].path differs from the commit a clone of it starts from."""

    head: str  # the commit id a clone checks out; "" when the repository has no commit yet
    paths: tuple[str, ...]  # repository-relative files whose working-tree state differs from head
    # (modified, staged, deleted or untracked; ignored files are not listed)


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class LocalSource:
    """The local repository a fresh run clones, as a world's optional source methods get it."""

    path: Path  # the repository, resolved
    named: str  # [repo].path as the manifest spells it, for what the world tells the user
    start_from: str  # "head" (committed history only) or "worktree" (uncommitted files too)
    # what the run writes or reads from the checkout anyway (its workspace, state, manifest,
    # injects): never counted among the files a clone leaves out
    own: tuple[Path, ...] = ()


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class RecordedKept:
    """What a world's private record of kept history names (see `World.recorded_kept`)."""

    latest: str  # the token of the latest state the world kept
    setup: str  # the token of the state setup made: latest == setup means nothing was kept since


@runtime_checkable
class World(Protocol):
    """Reversibility of the workspace.

    A world may also define, for a fresh run that clones a local repository ([repo].path), the
    optional `source_notice(source: LocalSource) -> tuple[str, str] | None`: a ("warn" or "info",
    text) finding that `check` and the run's start show, say that uncommitted files stay behind;
    and `clone_working_tree(source: LocalSource) -> None`, which `[repo] start_from = "worktree"`
    needs: the clone, with the working tree's uncommitted files carried over it.

    And the optional `recorded_kept() -> RecordedKept | None`: what the world's own record of
    kept states (under `WorldContext.private_dir`, out of the agent's workspace) names, each
    state one restore() can return to; None when it keeps no such record. A resume checks the
    session log against it before it rolls anything back: a log that lost the latest kept
    state is repaired, never used to roll back past it (docs/operating.md, "Resuming").

    And the optional `describe_change(base: str) -> tuple[str, str]`: the candidate now in the
    workspace against the kept state `base` (a token snapshot() returned), as (unified diff,
    git's one-line diffstat). The engine calls it between the measure and the decision, so
    every keep and discard row carries the change as evidence; it bounds and redacts the text.
    A world without it writes rows with an empty diff. With it, the optional
    `describe_staged(base: str, token: str) -> tuple[str, str]` answers the same for a
    candidate stage() already named `token`, which the workspace still holds; the engine asks it
    after a valid measure, instead of having the world stage (and check) the workspace again.
    """

    def clone_from(self, source: str, ref: str | None) -> None:
        """Fill the (absent or empty) workspace with a checkout of [repo] (a path or URL) at ref.

        The default setup when the manifest has no setup_cmd. Raises RunFailed when it cannot.
        """

    def prepare(self) -> str:
        """Make the workspace a repository whose base commit holds everything now in it.

        Commits the current tree as the baseline when there is no commit or the tree is dirty,
        records the pristine base, writes the
        spared paths to the repository's exclude file, and returns the base commit id.
        """

    def recover(self) -> None:
        """Clear what a killed predecessor left half-done in the world (a stale lock file, say).

        Called once when a run resumes, before its first restore. The engine refuses to resume
        while the previous process still answers, so whatever is found belongs to a dead run.
        """

    def snapshot(self, label: str) -> str:
        """Keep the current candidate; return the token that restores exactly this state."""

    def restore(self, token: str) -> None:
        """Roll the world back to a token snapshot() returned. Raises RunFailed on failure."""

    def apply(self) -> ApplyOutcome:
        """Make the candidate live before it is measured (a no-op for a plain tree)."""

    def stage(self) -> Staged:
        """Name the candidate as it stands, cheaply and without keeping it.

        Called before a measure (an unchanged candidate is discarded unmeasured) and after it
        (a different token means the measure changed what would be kept). A world that finds
        its own records damaged repairs them, says so through the context's `note`, and
        returns `refused`.
        """

    def put_back_staged(self, token: str) -> None:
        """Put the files back to the content stage() named `token`, undoing what came after.

        Called after a measure whose run changed the candidate (a Python measure leaves
        `__pycache__/`, a careless one rewrites a file): the measure's side effects are rolled
        back, so a keep commits exactly what was measured. Raises RunFailed when it cannot.
        """

    def last_commit_sha(self) -> str | None:
        """The git half of the latest kept state, for kept_shas and publishing."""

    def changed_paths(self) -> list[str]:
        """Workspace-relative paths that differ from the last kept state (spared paths excluded)."""

    def change(self, head: str, base: str | None = None) -> str:
        """The change between two kept states as a unified diff (`crucible diff` shows it).

        `head` and `base` are tokens snapshot() returned; base None means the kept state just
        before head. A world that cannot show changes may raise CrucibleError saying so.
        """


WorldFactory = Callable[[WorldContext], World]


@runtime_checkable
class AssembledWorld(Protocol):
    """A World made of its components' worlds (WorldContext.parts): a fresh run sets each
    component's workspace up through that component's own world."""

    def part(self, name: str) -> World:
        """The world of the component named `name`."""


@runtime_checkable
class ForkingWorld(Protocol):
    """A World that can also lend out private worktrees: what a wide round needs (docs/search.md).

    A wide round proposes N candidates at once, each in its own fork of the kept state, and
    then brings each candidate's change into the main workspace to measure it there. A world
    without these methods (the command world: its domain state lives outside the files) makes
    a manifest with `[search].wide` refuse to start.
    """

    def fork_problem(self) -> str | None:
        """Why this world cannot fork here (a missing tool, say), or None when it can."""

    def fork(self, path: Path, token: str) -> None:
        """Make `path` (absent) a private worktree holding the kept state `token`.

        Cheap: comparable to `git worktree add`. Raises RunFailed when it cannot.
        """

    def capture(self, path: Path, token: str, into: Path) -> bool:
        """Write the fork's change against `token` to the file `into`; False when there is none.

        The file is self-contained (binary-safe): `adopt` needs nothing else, so a candidate
        survives its fork's removal and the engine's death. Raises RunFailed when it cannot.
        """

    def adopt(self, change: Path) -> ApplyOutcome:
        """Apply a captured change on top of the main workspace's current (kept) state."""

    def remove_fork(self, path: Path) -> None:
        """Remove a fork and every record of it; a missing or half-made fork is not an error."""


# ---------------------------------------------------------------------------------------------
# Judge: measures a candidate once. The agent never receives one.


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class MeasureContext:
    """The engine's numbers a judge may show the measure command (absent on the baseline).

    shell: set when the engine runs this measure somewhere else (a task runner serving the
      capability the judge `needs`): the judge runs its command through it, with the
      environment it would add locally, instead of on this machine.
    """

    iteration: int
    baseline_score: float | None = None
    baseline_total: float | None = None
    best_score: float | None = None
    shell: CommandShell | None = None


class CommandShell(Protocol):
    """Runs one shell command in a workspace with its environment and deadline, wherever it runs.

    A failure to carry the command out at all (never started, lost with its machine) is
    reported as `spawn_error`; the caller treats it as a transport failure, not a verdict.

    stdin: the command's standard input (none: empty).
    returns_workspace: the command edits its workspace and the caller reads the edits there
      afterwards; a shell running elsewhere brings the workspace the command left back into
      the task's workdir before it returns (only when the command succeeded). A workspace
      that cannot be brought back makes the command's result a failure that says why.
      Only a kind whose spec says `returns_workspace` asks for it.
    """

    def __call__(
        self,
        command: str,
        env: Mapping[str, str],
        timeout: float,
        *,
        stdin: ShellStdin | None = None,
        returns_workspace: bool = False,
    ) -> Completed: ...


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class JudgeContext:
    section: JudgeSection | None
    workspace: Path
    shell: Shell
    measure_timeout: float | None = None
    settings: Any = None  # the [judge] keys beyond core's, as the settings class this judge registered


@runtime_checkable
class Judge(Protocol):
    # Read-only members, so an attrs frozen class or a property satisfies them.
    @property
    def gate(self) -> str:
        """The objective label, written on the wire under the key "gate"."""

    @property
    def scored(self) -> bool:
        """False for the task lane: no baseline, every completed turn is kept."""

    def measure(self, ctx: MeasureContext) -> Reading:
        """Measure the workspace as it is now. Never raises for a bad measure command."""


def recorded_kept(world: World) -> RecordedKept | None:
    """What the world's own record of kept states names, or None (a world without a record)."""
    ask = getattr(world, "recorded_kept", None)
    found = ask() if callable(ask) else None
    return found if isinstance(found, RecordedKept) else None


def judge_needs(judge: Judge) -> str | None:
    """The capability a judge's measure needs (`needs`, optional on a judge), or None for any machine.

    A judge that declares one promises to run its commands through `MeasureContext.shell`
    when the engine sets it, so its measure can be carried out where the capability is.
    """
    needs = getattr(judge, "needs", None)
    return needs if isinstance(needs, str) and needs not in ("", "any") else None


JudgeFactory = Callable[[JudgeContext], Judge]


# ---------------------------------------------------------------------------------------------
# Agent turns: a backend decides where a turn runs, a harness which agent program runs it.


class FailureClass(enum.StrEnum):
    AGENT = "agent"  # the agent ran and reported an error
    PROVIDER = "provider"  # the model provider failed (auth, overload, API error)
    COMMAND = "command"  # the agent command exited nonzero
    TIMEOUT = "timeout"  # the turn outlived its deadline and was killed
    SPAWN = "spawn"  # the agent program could not be started
    STREAM = "stream"  # the agent's event stream broke off or could not be decoded


# A transport failure says nothing about the candidate: the iteration is not spent.
TRANSPORT_FAILURES = frozenset({FailureClass.SPAWN, FailureClass.STREAM})


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class TurnResult:
    ok: bool
    failure: FailureClass | None = None
    cost_usd: float = 0.0
    note: str = ""

    @property
    def transport_failure(self) -> bool:
        return self.failure in TRANSPORT_FAILURES


AgentEventSink = Callable[[str, Mapping[str, Any]], None]


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class Turn:
    """One agent turn. `emit(kind, fields)` writes an agent event to the session log."""

    iteration: int
    prompt: str
    workspace: Path
    env: Mapping[str, str]
    deadline_seconds: float | None
    emit: AgentEventSink
    model: str | None = None
    effort: str | None = None
    session: str | None = None
    mcp_servers: Mapping[str, Any] = attrs.field(factory=dict)
    # The run services this turn needs, as the engine's local forwards reach them; a backend that
    # isolates the turn maps each onto a forward of its own.
    services: tuple[ServiceForward, ...] = ()


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class BackendContext:
    manifest: Manifest
    agent: AgentSection
    manifest_dir: Path
    workspace: Path
    private_dir: Path  # mode-0700 engine state: session cursors and the like, never published
    shell: Shell
    resolve_harness: Callable[[str], Harness]
    harness_name: str
    settings: Any = None  # this backend's [agent] keys (and [agent.<name>] table), as its settings class


@runtime_checkable
class AgentBackend(Protocol):
    """Runs agent turns.

    A backend may also define the optional `preflight(env, workspace) -> list[str]`: what
    would stop a turn from starting (a program not on PATH, no credentials), each problem one
    sentence that says how to fix it; an empty list when a turn can start. `crucible check`
    prints the problems and a run refuses to start on them, before its baseline. `env` is the
    agent's environment ([agent].env included); `workspace` is None, or may not exist yet,
    before setup has made it.
    """

    def run_turn(self, turn: Turn) -> TurnResult:
        """Let the agent edit turn.workspace; never raises for an agent failure."""


BackendFactory = Callable[[BackendContext], AgentBackend]


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class ShellTurn:
    """One agent turn as a single shell command: a turn a task runner can carry out elsewhere.

    command: run by `sh -c` in the turn's workspace.
    env: the command's environment as it would run here (a runner sends on only the names it
      forwards, never this machine's whole environment).
    stdin: the prompt, on standard input; `stdin_file_env` names the variable that points at a
      file holding the same bytes (the runner sets it to the path where the command runs).
    finish: what the command did (a `crucible_core.process.Completed`) -> the turn's result.
    """

    command: str
    env: Mapping[str, str]
    stdin: bytes
    stdin_file_env: str | None
    finish: Callable[[Completed], TurnResult]


@runtime_checkable
class ShellTurnBackend(Protocol):
    """A backend whose turn is one shell command: the `command` backend, and the `local` backend
    over a `SandboxHarness` (its sandbox command, written out for a pod).

    A wide round whose `[search].needs` this machine lacks hands each proposal's command to a
    task runner; a backend without `shell_turn` (a harness that cannot describe its turn as a
    command, a sandbox of its own) cannot be carried out that way, and such a run is refused
    at start.
    """

    def shell_turn(self, turn: Turn) -> ShellTurn:
        """The turn as one command; it must not start anything."""


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class HarnessContext:
    agent: AgentSection
    manifest_dir: Path
    private_dir: Path
    settings: Any = None  # this harness's [agent] keys, as the settings class it registered


@runtime_checkable
class Harness(Protocol):
    """One agent program. Like a backend it may define the optional `preflight(env) -> list[str]`
    (the `local` backend asks its harness): each problem that would stop a turn, with its fix."""

    def run(self, turn: Turn) -> TurnResult:
        """Run one turn of this agent program on the host, in turn.workspace."""


HarnessFactory = Callable[[HarnessContext], Harness]


# ---------------------------------------------------------------------------------------------
# Harnesses inside a sandbox: a sandboxing backend (openshell) runs the harness's program in a
# box of its own, so the harness describes the command instead of starting it.


@runtime_checkable
class SandboxHarness(Protocol):
    def sandbox_command(self, turn: Turn, layout: SandboxLayout) -> SandboxCommand | TurnResult:
        """The turn as a command for the sandbox at `layout`, or a TurnResult when it cannot run."""


# ---------------------------------------------------------------------------------------------
# Reporters: views of the session log (console, jsonl, dashboards).


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class ReporterContext:
    stream: Any  # a text stream, normally sys.stderr
    iterations: int | None


@runtime_checkable
class Reporter(Protocol):
    def on_event(self, event: Mapping[str, Any]) -> None:
        """Receive one session-log event after it was durably written."""

    def close(self) -> None:
        """The run is over; flush whatever is left."""


ReporterFactory = Callable[[ReporterContext], Reporter]


# ---------------------------------------------------------------------------------------------
# Run services: how a running catalog tool is served to the tasks that need it. The engine keeps
# the lifecycle (start, restart bound, stop) and the bearer; a transport plugin, chosen by the
# catalog entry's `transport` ("mcp-http", "mcp-stdio", "http"), puts the engine's forward in
# front of the tool and says when it is ready. (The tools themselves: services.catalog.ServiceTool.)


class ServiceEndpoint(Protocol):
    """What a transport made for one instance: the forward tasks use, and a readiness probe."""

    @property
    def port(self) -> int:
        """Where the service answers on loopback: the tool's own port, or the transport's relay."""

    def url(self, path: str = "") -> str:
        """The forward's URL (loopback, bearer-checked) with `path` appended."""

    def ready(self, timeout: float) -> bool:
        """One readiness probe, bounded by `timeout` seconds: True once the service serves."""

    def close(self) -> None:
        """Stop the forward (and any relay); the engine stops the tool's process itself."""


class ServiceTransport(Protocol):
    """One catalog transport, registered under its catalog name (crucible_register_service_transports)."""

    def serve(self, tool: ServedTool) -> ServiceEndpoint:
        """Start serving a just-started instance; raise OSError when the forward cannot listen."""


# ---------------------------------------------------------------------------------------------
# Publishers: the engine's own writes of kept work to a forge ([publish], publish-on-keep).


@runtime_checkable
class Publisher(Protocol):
    def publish(self, request: PublishRequest) -> str:
        """Push the commit to the run's branch, open its draft pull request or update the one already
        open for that branch (its title and body); return the pull request's URL. Publishing the
        same request twice pushes nothing the second time and opens no second pull request.

        Raise a CrucibleError saying what failed: the engine records it and the run goes on.
        """


PublisherFactory = Callable[[], Publisher]


# ---------------------------------------------------------------------------------------------
# Workspace memory: a playbook's history of its workspace, kept by the plugin that knows how
# (the git world's), so no lane of core runs a version-control tool itself.


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class WorkspaceMemoryContext:
    """What a WorkspaceMemory factory gets.

    `record_dir` is the memory's own directory under the run's private state directory (out of
    the agent's reach: what it trusts about the workspace's repository lives there);
    `engine_files` are workspace-root names the engine writes for a task (its staged inputs, its
    result file) that belong to no task's change.
    """

    workspace: Path
    record_dir: Path
    engine_files: tuple[str, ...] = ()


class WorkspaceMemory(Protocol):
    """The history a playbook keeps of its shared workspace: a pristine base, then one commit per
    passing task, while a failing task's changes are thrown away.

    Tasks write the workspace, so everything in it (the repository's own files included) is the
    agent's: an implementation reads none of it as configuration.
    """

    @property
    def workspace(self) -> Path: ...

    def clone_from(self, source: str, ref: str | None, *, cwd: Path) -> None:
        """Fill the absent or empty workspace with a clone of `source` (a URL, or a path relative
        to `cwd`) and check out `ref` when given. Raise a CrucibleError saying what failed."""

    def ensure(self) -> None:
        """Make the memory once: the workspace's repository if it has none, and its base commit."""

    def settled(self, task: str, passed: bool, quiescent: bool) -> None:
        """A shared task settled: keep its changes as a commit when it passed, discard them when
        not; `quiescent` says no other shared task is running (changes are told apart only then)."""

    def base_commit(self) -> str | None:
        """The base commit as the memory recorded it; None before ensure()."""

    def reset_to_base(self) -> bool:
        """Put the workspace back to the base commit; False (and the record forgotten) when it cannot."""


WorkspaceMemoryFactory = Callable[[WorkspaceMemoryContext], WorkspaceMemory]


# ---------------------------------------------------------------------------------------------
# Domain packs: `--pack NAME` runs a directory a plugin registered (crucible_register_packs) from
# a copy in ./NAME. The copying is a plugin's; core asks it through crucible_domain_packs.


class DomainPacks(Protocol):
    def prepare(self, plugins: Plugins, name: str, repo: Path | None, base: Path | None = None) -> Path:
        """Make or refresh the copy of pack `name` in `<base or cwd>/<name>`; its manifest.

        With `repo`, the copy's manifest names that repository; a repository lacking what the
        pack needs is refused (ManifestError) before anything is copied.
        """
        ...

    def existing_manifest(self, name: str) -> Path:
        """The manifest of an earlier copy in ./NAME, never copying (UsageError when none)."""
        ...

    def needs(self, plugins: Plugins, name: str, repo: Path | None) -> list[tuple[str, str]]:
        """What `check --pack` reports about the pack: ("ok" | "fail" | "info", text) lines."""
        ...

    def provenance(self, manifest_dir: Path) -> str | None:
        """The pack a run directory was copied from, as the run identity takes it in; None for none."""
        ...


# The records a run of a command agent never builds live in protocol_records.py and are defined
# the first time one is asked for here (or through crucible_core.api).
_RECORDS_ELSEWHERE = frozenset(
    {"ShellStdin", "SandboxLayout", "SandboxCommand", "ServedTool", "PublishRequest"}
)


def __getattr__(name: str) -> Any:
    if name in _RECORDS_ELSEWHERE:
        from crucible_core import protocol_records

        value = getattr(protocol_records, name)
        globals()[name] = value  # found directly from now on
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
