"""attrs models for every manifest section this version executes."""

from __future__ import annotations

import attrs

from crucible_core.contract.reading import Direction

DEFAULT_MODEL = "claude-opus-4-6"

# Sections the specification defines but this version does not execute. They are refused by
# name rather than accepted and ignored: a run must never silently drop part of its manifest.
UNSUPPORTED_SECTIONS = (
    "search",
    "workflow",
    "preflight",
    "outputs",
    "capabilities",
    "publish",
    "composite",
    "component",
    "service",
    "measure",
    "deploy",
    "scope",
)
UNSUPPORTED_AGENT_TABLES = ("openshell", "broker", "relay", "requires", "prefers", "codex")
UNSUPPORTED_AGENT_KEYS = ("sandbox_image", "allow_unverified_image")  # the openshell backend
UNSUPPORTED_WORKSPACE_KEYS = ("artifact",)


class Seconds(float):
    """A duration in seconds; the manifest may write it as a number or as text like "90s", "1h30m"."""


@attrs.frozen
class RepoSection:
    url: str | None = None
    path: str | None = None
    ref: str | None = None


@attrs.frozen
class InjectEntry:
    """The table form of an inject; the string form is shorthand for {src=s, dst=s, frozen=true}."""

    src: str
    dst: str | None = None
    frozen: bool = True


@attrs.frozen
class WorkspaceSection:
    dir: str = "workspace"
    setup_cmd: str | None = None
    inject: tuple[str | InjectEntry, ...] = ()
    carry_forward: tuple[str, ...] = ()


@attrs.frozen
class AgentSection:
    backend: str = "local"
    harness: str = "claude"
    model: str = DEFAULT_MODEL
    effort: str | None = None
    method_prompt: str | None = None
    goal: str | None = None
    goal_file: str | None = None
    toolbox_dir: str | None = None
    agent_cmd: str | None = None
    env: dict[str, str] = attrs.field(factory=dict)
    session: str | None = None  # a logical conversation continued across turns
    turn_timeout: Seconds | None = None  # seconds; the supervisor kills a turn that outlives it


@attrs.frozen
class SelftestSection:
    good_cmd: str
    bad_cmd: str
    runs: int = 1


@attrs.frozen
class JudgeSection:
    direction: Direction
    measure_cmd: str | None = None  # required by the default "command" judge
    kind: str | None = None  # a registered judge by name; default "command"
    tiebreak_direction: Direction | None = None
    objective: str = "score"
    selftest: SelftestSection | None = None
    measure_timeout: Seconds | None = None  # seconds; a hung measure is killed and reads invalid


@attrs.frozen
class WorldSection:
    apply_cmd: str | None = None
    snapshot_cmd: str | None = None
    restore_cmd: str | None = None
    kind: str | None = None  # a third-party World by name; default: git, or command if any cmd

    @property
    def has_commands(self) -> bool:
        return any((self.apply_cmd, self.snapshot_cmd, self.restore_cmd))

    def resolved_kind(self) -> str:
        if self.kind:
            return self.kind
        return "command" if self.has_commands else "git"


@attrs.frozen
class Manifest:
    repo: RepoSection | None = None
    workspace: WorkspaceSection = WorkspaceSection()
    agent: AgentSection = AgentSection()
    judge: JudgeSection | None = None
    world: WorldSection = WorldSection()

    @property
    def task_lane(self) -> bool:
        return self.judge is None

    def judge_kind(self) -> str:
        if self.judge is None:
            return "task"
        return self.judge.kind or "command"
