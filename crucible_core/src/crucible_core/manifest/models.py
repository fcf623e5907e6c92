"""attrs models for every manifest section this version executes."""

from __future__ import annotations

import re
from typing import Any

import attrs

from crucible_core.contract.noise import Margin, Statistic
from crucible_core.contract.reading import Direction
from crucible_core.contract.records import value_methods
from crucible_core.manifest.broker_sections import BrokerSection, CapabilitiesSection, OutputDeclaration
from crucible_core.manifest.capability import Capability as Capability  # re-exported: the models use it
from crucible_core.manifest.durations import Seconds as Seconds  # re-exported: the models use it

# Sections the specification defines but this version does not execute. They are refused by
# name rather than accepted and ignored: a run must never silently drop part of its manifest.
UNSUPPORTED_SECTIONS = (
    "measure",
    "scope",
    "rig",  # ADR-0013's rig backends ([rig].backend)
)
UNSUPPORTED_AGENT_TABLES = ("relay", "requires", "prefers")
UNSUPPORTED_AGENT_KEYS = ("allow_unverified_image",)  # image verification for sandboxing backends
UNSUPPORTED_WORKSPACE_KEYS: tuple[str, ...] = ()


REPO_STARTS = ("head", "worktree")


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class RepoSection:
    url: str | None = None
    path: str | None = None
    ref: str | None = None
    # "head": the run starts from the committed HEAD (uncommitted edits are left out, loudly);
    # "worktree": from the working tree of `path`, uncommitted and untracked files included.
    start_from: str = "head"


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class InjectEntry:
    """The table form of an inject; the string form is shorthand for {src=s, dst=s, frozen=true}."""

    src: str
    dst: str | None = None
    frozen: bool = True


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class ArtifactEntry:
    """One [[workspace.artifact]]: derived output carried across discards and published.

    `path` is carried exactly like a carry_forward entry. `embed` and `upload` name the file to
    publish inside it (the newest match wins): an embed is shown in the PR body and written to the
    run record, an upload goes to the run record only. crucible_core/artifacts.py collects them.
    """

    path: str
    embed: str | None = None
    upload: str | None = None
    title: str | None = None  # the PR body's heading for it; default: the path

    @property
    def heading(self) -> str:
        return self.title if self.title else self.path


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class WorkspaceSection:
    dir: str = "workspace"
    setup_cmd: str | None = None
    inject: tuple[str | InjectEntry, ...] = ()
    carry_forward: tuple[str, ...] = ()
    artifact: tuple[ArtifactEntry, ...] = ()

    @property
    def carried(self) -> tuple[str, ...]:
        """Every workspace path a discard keeps: carry_forward, then each artifact's path."""
        return tuple(dict.fromkeys([*self.carry_forward, *(entry.path for entry in self.artifact)]))


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class AgentSection:
    """The [agent] keys core reads; the rest of [agent] belongs to the backend and harness plugins."""

    backend: str = "local"
    harness: str = "claude"
    model: str | None = None  # None: the harness's own default model
    effort: str | None = None
    method_prompt: str | None = None
    goal: str | None = None
    goal_file: str | None = None
    env: dict[str, str] = attrs.field(factory=dict)
    session: str | None = None  # a logical conversation continued across turns
    turn_timeout: Seconds | None = None  # seconds; the supervisor kills a turn that outlives it
    broker: BrokerSection = BrokerSection()  # the broker tools turns are granted (docs/broker.md)
    # Declared [[service]] names every agent turn needs (docs/services.md, "Services for agent turns").
    services: tuple[str, ...] = ()


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class SelftestSection:
    good_cmd: str
    bad_cmd: str
    runs: int = 1


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class JudgeSection:
    direction: Direction
    measure_cmd: str | None = None  # required by the default "command" judge
    kind: str | None = None  # a registered judge by name; default "command"
    tiebreak_direction: Direction | None = None
    objective: str = "score"
    selftest: SelftestSection | None = None
    measure_timeout: Seconds | None = None  # seconds; a hung measure is killed and reads invalid
    # Noise handling (docs/search.md): the engine, not the judge, applies these.
    repeats: int = 1  # measure each candidate (and the baseline) this many times
    statistic: Statistic = Statistic.MEDIAN  # how the repeats fold into one score
    min_improvement: Margin = Margin()  # a keep must beat the best by more than this
    noise: str | None = None  # "auto": also require the baseline's measured spread
    # A capability the measure needs ("gpu"): where this machine lacks it (no --cap), a task
    # runner serving it (a [deploy] profile's cluster) carries the measure out (docs/kubernetes.md).
    needs: Capability | None = None


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class WorldSection:
    """The [world] key core reads; the rest of [world] belongs to the world plugin."""

    kind: str | None = None  # a World by name; default: git, or command when [world] has other keys

    def resolved_kind(self, has_settings: bool) -> str:
        if self.kind:
            return self.kind
        # The git world takes no settings: keys in [world] (apply_cmd, ...) mean the command world.
        return "command" if has_settings else "git"


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class WorkflowSection:
    """[workflow]: the work graph's lane, its result task, and its [[workflow.task]] IR tables.

    The task tables are kept raw here and loaded by the plan loader, which owns their keys.
    A workflow.star beside the manifest compiles to the same shape.
    """

    type: str
    result: str | None = None
    task: tuple[dict[str, Any], ...] = ()


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class PreflightRung:
    """One cheap command that proves the environment (`when = "start"`) or each candidate."""

    cmd: str
    name: str | None = None  # defaults to the command itself in messages and rows
    message: str | None = None  # what to do when it fails (shown with the failure)
    timeout: Seconds | None = None  # default: [preflight].timeout
    when: str = "start"  # "start": once before the baseline; "candidate": before each measure

    def label(self) -> str:
        return self.name or self.cmd


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class PreflightSection:
    commands: tuple[str, ...] = ()  # shorthand: start rungs named by their command
    timeout: Seconds | None = None  # per rung; default 60 seconds
    rung: tuple[PreflightRung, ...] = ()

    def rungs(self, when: str) -> tuple[PreflightRung, ...]:
        listed = tuple(PreflightRung(cmd=cmd) for cmd in self.commands) if when == "start" else ()
        return listed + tuple(r for r in self.rung if r.when == when)


# A forge repository as publish addresses it: owner/name, nothing that could turn into a path or URL.
# compiled by `re` at the first check: only a manifest with a [publish] table has one
_FORGE_REPO = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}/[A-Za-z0-9_.-]{1,100}"
_BRANCH = r"[A-Za-z0-9][A-Za-z0-9_./-]{0,199}"


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class PublishSection:
    """[publish]: publish-on-keep, the run's kept commits as one draft pull request (one `draft-pr` write)."""

    pr_repo: str  # owner/name of the repository the draft PRs open on (the draft-pr target)
    forge: str = "github"  # the publisher that opens them (a registered name)
    base: str = "main"  # the branch the pull requests ask to merge into
    # The results destination of the run's record (crucible-plugin-run-records writes it):
    # s3://bucket[/prefix] or file:///abs/path; `crucible run --results-bucket` overrides it.
    record: str | None = None

    def __attrs_post_init__(self) -> None:
        if not re.fullmatch(_FORGE_REPO, self.pr_repo) or ".." in self.pr_repo:
            raise ValueError(f"pr_repo {self.pr_repo!r} must be owner/name")
        if self.record is not None and not self.record.startswith(("s3://", "file:///")):
            raise ValueError(f"record {self.record!r} must be s3://bucket[/prefix] or file:///abs/path")
        if not re.fullmatch(_BRANCH, self.base) or ".." in self.base or self.base.endswith((".lock", "/")):
            raise ValueError(f"base {self.base!r} is not a branch name")


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class PackSection:
    """[pack]: what a domain pack needs from a repository it is applied to (`--pack NAME --repo PATH`)."""

    requires: tuple[str, ...] = ()  # repository-relative files that must exist
    setup_cmd: str | None = None  # prepares a fresh clone, run inside it with `sh -c`
    description: str = ""

    def __attrs_post_init__(self) -> None:
        for rel in self.requires:
            if not rel or rel.startswith("/") or ".." in rel.split("/"):
                raise ValueError(f"requires entry {rel!r} must be a path inside the repository")


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class Manifest:
    repo: RepoSection | None = None
    workspace: WorkspaceSection = WorkspaceSection()
    agent: AgentSection = AgentSection()
    judge: JudgeSection | None = None
    world: WorldSection = WorldSection()
    outputs: dict[str, OutputDeclaration] = attrs.field(factory=dict)  # mediated-write bounds
    capabilities: CapabilitiesSection = CapabilitiesSection()  # disclosed reach
    workflow: WorkflowSection | None = None
    preflight: PreflightSection | None = None
    publish: PublishSection | None = None  # publish-on-keep (draft pull requests)
    # [deploy]: where this run's tasks may run beyond this machine. Its keys belong to the task
    # runner plugin that registers settings for them (manifest/driver_settings.py); core only
    # knows whether the table is there.
    deploy: dict[str, Any] | None = None
    # [search]: a round before the deep loop. Its keys belong to the round strategy plugin that
    # registers settings for them (run/rounds.py, manifest/driver_settings.py).
    search: dict[str, Any] | None = None
    pack: PackSection | None = None  # read by --pack; a run of the copy ignores it

    @property
    def playbook(self) -> bool:
        return self.workflow is not None and self.workflow.type == "playbook"

    # [composite] and its [[component]] tables: a world assembled from other domains' worlds.
    # Their keys belong to the world plugin registered as ASSEMBLED_WORLD, which loads each
    # component (LoadedManifest.components); core only knows whether they are there.
    composite: dict[str, Any] | None = None
    component: tuple[dict[str, Any], ...] = ()

    @property
    def assembled(self) -> bool:
        """Made of other domains: each brings its own repository, so this one names none."""
        return self.composite is not None or bool(self.component)

    @property
    def task_lane(self) -> bool:
        return self.judge is None

    def judge_kind(self) -> str:
        if self.judge is None:
            return "task"
        return self.judge.kind or "command"
