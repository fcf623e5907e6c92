"""GitWorld: the default World; kept iterations are commits, discards are reset --hard plus clean."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import attrs

from crucible_core.protocols import ApplyOutcome, SourceChanges, Staged, WorldContext
from crucible_world_git import forks
from crucible_world_git.change_diff import commit_change
from crucible_world_git.clone import clone_into
from crucible_world_git.git_memory import BASELINE_LABEL, GitMemory
from crucible_world_git.source_status import source_changes


@attrs.define
class GitWorld:
    """A workspace whose reversibility is its git repository; the token is a commit id."""

    memory: GitMemory
    # each live fork's git directory, as git made it (the fork's own .git file is the agent's)
    fork_gitdirs: dict[Path, Path] = attrs.field(factory=dict)

    @classmethod
    def from_context(cls, ctx: WorldContext) -> GitWorld:
        record = ctx.private_dir / "kept-record" if ctx.private_dir is not None else None
        return cls.at(ctx.workspace, ctx.spared, record=record, note=ctx.note)

    @classmethod
    def at(
        cls,
        workspace: Path,
        spared: tuple[str, ...] = (),
        *,
        record: Path | None = None,
        note: Callable[[str], None] | None = None,
    ) -> GitWorld:
        """A world on `workspace`; `record` is where its private copy of kept history lives."""
        return cls(GitMemory(workspace, spared, record, note))

    def clone_from(self, source: str, ref: str | None) -> None:
        clone_into(self.memory, source, ref)

    def source_changes(self, source: str) -> SourceChanges | None:
        return source_changes(source)

    def prepare(self) -> str:
        memory = self.memory
        memory.forget_record()
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

    def change(self, head: str, base: str | None = None) -> str:
        return commit_change(self.memory, head, base)

    # -- forks for wide rounds (crucible_core.protocols.ForkingWorld) ----------------------
    def fork_problem(self) -> str | None:
        return forks.git_problem()

    def fork(self, path: Path, token: str) -> None:
        self.fork_gitdirs[path] = forks.add_fork(self.memory.workspace, path, token)

    def capture(self, path: Path, token: str, into: Path) -> bool:
        return forks.capture(path, token, into, self.fork_gitdirs.get(path))

    def adopt(self, change: Path) -> ApplyOutcome:
        return forks.adopt(self.memory.workspace, change)

    def remove_fork(self, path: Path) -> None:
        forks.remove_fork(self.memory.workspace, path)
        self.fork_gitdirs.pop(path, None)
