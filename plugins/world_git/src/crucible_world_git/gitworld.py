"""GitWorld: the default World; kept iterations are commits, discards are reset --hard plus clean."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import attrs

from crucible_core.api import (
    AgentFileRefused,
    ApplyOutcome,
    LocalSource,
    RecordedKept,
    RunFailed,
    SourceChanges,
    Staged,
    WorldContext,
    read_regular,
)
from crucible_world_git import excludes, forks, working_tree
from crucible_world_git.clone import clone_into
from crucible_world_git.git_memory import BASELINE_LABEL, GitMemory
from crucible_world_git.source_status import source_changes


@attrs.define
class GitWorld:
    """A workspace whose reversibility is its git repository; the token is a commit id."""

    memory: GitMemory
    # where the engine's own git directories live (None: the system's temporary directory)
    scratch: Path | None = None
    # each live fork's engine git directory's home (the fork's own .git is the agent's)
    fork_gitdirs: dict[Path, Path] = attrs.field(factory=dict)

    @classmethod
    def from_context(cls, ctx: WorldContext) -> GitWorld:
        private = ctx.private_dir
        if private is None:
            return cls.at(ctx.workspace, ctx.spared, note=ctx.note)
        return cls.at(
            ctx.workspace,
            ctx.spared,
            record=private / "kept-record",
            note=ctx.note,
            scratch=private / "engine-git",
        )

    @classmethod
    def at(
        cls,
        workspace: Path,
        spared: tuple[str, ...] = (),
        *,
        record: Path | None = None,
        note: Callable[[str], None] | None = None,
        scratch: Path | None = None,
    ) -> GitWorld:
        """A world on `workspace`; `record` is where its private copy of kept history lives,
        `scratch` where its forks' engine git directories do."""
        return cls(GitMemory(workspace, spared, record, note), scratch)

    def clone_from(self, source: str, ref: str | None) -> None:
        clone_into(self.memory, source, ref)

    def source_changes(self, source: str) -> SourceChanges | None:
        return source_changes(source)

    def source_notice(self, source: LocalSource) -> tuple[str, str] | None:
        return working_tree.notice(source)

    def clone_working_tree(self, source: LocalSource) -> None:
        changes = working_tree.left_out(source)  # before the clone: it may land inside the source
        self.clone_from(str(source.path), None)
        if changes is not None:
            working_tree.overlay_working_tree(source.path, self.memory.workspace, changes)

    def prepare(self) -> str:
        memory = self.memory
        memory.forget_record()
        self._clear_scratch()
        if not memory.is_repository():
            memory.init()
        memory.write_spared()
        # Commits only when there is no commit yet or the tree differs from HEAD.
        head = memory.snapshot(BASELINE_LABEL, pack=True).encode()
        base = memory.base()
        if base is None:
            memory.set_base(head)
            base = head
        memory.start_record()
        return base.decode()

    def recover(self) -> None:
        self._clear_scratch()  # engine git directories of forks a killed round left
        memory = self.memory
        record = memory.record
        if record is not None and record.exists():
            why = memory.damage()
            kept = record.kept()
            if why is not None and kept is not None:
                memory.rebuild(why, kept)
                return
        if memory.is_repository():
            memory.clear_stale_locks()
            if record is not None and not record.exists() and memory.damage() is None:
                memory.start_record()  # a run set up before the world kept a record

    def recorded_kept(self) -> RecordedKept | None:
        """The record's latest kept commit and the base setup made, when the record holds both."""
        record = self.memory.record
        if record is None or not record.exists():
            return None
        latest, base = record.kept(), record.base()
        if latest is None or base is None:
            return None
        try:
            held = record.has_commit(latest)
        except OSError:  # a record it cannot read names nothing: the resume goes by the log
            held = False
        return RecordedKept(latest=latest, setup=base) if held else None

    def snapshot(self, label: str) -> str:
        return self.memory.snapshot(label)

    def restore(self, token: str) -> None:
        self.memory.restore(token)

    def apply(self) -> ApplyOutcome:
        return ApplyOutcome(ok=True)

    def stage(self) -> Staged:
        token, unchanged, refused = self.memory.stage()
        return Staged(token=token, unchanged=unchanged, refused=refused)

    def put_back_staged(self, token: str) -> None:
        self.memory.put_back_staged(token)

    def last_commit_sha(self) -> str | None:
        if self.memory.kept is not None:
            return self.memory.kept
        head = self.memory.head() if self.memory.is_repository() else None
        return None if head is None else head.decode()

    def changed_paths(self) -> list[str]:
        return self.memory.changed_paths()

    # The diff writers are imported when a diff is asked for: they bring dulwich.patch and the
    # email package under it, which a run that describes no change (start-up, the baseline) never needs.

    def change(self, head: str, base: str | None = None) -> str:
        from crucible_world_git.change_diff import commit_change

        return commit_change(self.memory, head, base)

    def describe_change(self, base: str) -> tuple[str, str]:
        """The candidate in the workspace against kept state `base`: (unified diff, diffstat)."""
        token, _, refused = self.memory.stage()
        if refused or not token:
            return "", ""  # nothing of a candidate that could not be staged is read
        from crucible_world_git.candidate_diff import candidate_change

        return candidate_change(self.memory, base, token)

    def describe_staged(self, base: str, token: str) -> tuple[str, str]:
        """As describe_change, for a candidate stage() already named `token`: read from the
        object store, without staging (and checking) the workspace once more."""
        from crucible_world_git.candidate_diff import candidate_change

        return candidate_change(self.memory, base, token)

    # -- forks for wide rounds (crucible_core.protocols.ForkingWorld) ----------------------
    def fork_problem(self) -> str | None:
        return forks.git_problem()

    def fork(self, path: Path, token: str) -> None:
        memory = self.memory
        workspace_objects = Path(memory.db.store.path)
        record = memory.record
        objects = record.objects if record is not None and record.exists() else workspace_objects
        home = Path(tempfile.mkdtemp(prefix="fork-", dir=self._scratch()))
        try:
            forks.add_fork(path, token, home / "git", objects, workspace_objects, self._fork_excludes())
        except BaseException:
            shutil.rmtree(home, ignore_errors=True)
            raise
        self.fork_gitdirs[path] = home

    def capture(self, path: Path, token: str, into: Path) -> bool:
        home = self.fork_gitdirs.get(path)
        if home is None:
            raise RunFailed(f"{path} is not a fork this engine made", hint="remove it and fork again")
        return forks.capture(path, token, into, home / "git")

    def adopt(self, change: Path) -> ApplyOutcome:
        return forks.adopt(self.memory.workspace, change, self._scratch())

    def remove_fork(self, path: Path) -> None:
        forks.remove_fork(path, self.fork_gitdirs.pop(path, None))

    def _scratch(self) -> Path | None:
        if self.scratch is not None:
            self.scratch.mkdir(mode=0o700, parents=True, exist_ok=True)
        return self.scratch

    def _clear_scratch(self) -> None:
        if self.scratch is not None and not self.fork_gitdirs:
            shutil.rmtree(self.scratch, ignore_errors=True)

    def _fork_excludes(self) -> bytes:
        """What a fork's capture ignores besides its .gitignore files: the workspace's info/exclude."""
        try:
            return read_regular(self.memory.exclude_file(), 1 << 20)
        except (FileNotFoundError, AgentFileRefused):
            return excludes.render("", self.memory.spared).encode("utf-8", "surrogateescape")
