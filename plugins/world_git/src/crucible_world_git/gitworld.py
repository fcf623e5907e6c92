"""GitWorld: the default World; kept iterations are commits, discards are reset --hard plus clean."""

from __future__ import annotations

from pathlib import Path

import attrs

from crucible_core.protocols import ApplyOutcome, WorldContext
from crucible_world_git.clone import clone_into
from crucible_world_git.git_memory import BASELINE_LABEL, GitMemory


@attrs.define
class GitWorld:
    """A workspace whose reversibility is its git repository; the token is a commit id."""

    memory: GitMemory

    @classmethod
    def from_context(cls, ctx: WorldContext) -> GitWorld:
        return cls.at(ctx.workspace, ctx.spared)

    @classmethod
    def at(cls, workspace: Path, spared: tuple[str, ...] = ()) -> GitWorld:
        return cls(GitMemory(workspace, spared))

    def clone_from(self, source: str, ref: str | None) -> None:
        clone_into(self.memory, source, ref)

    def prepare(self) -> str:
        memory = self.memory
        if not memory.is_repository():
            memory.init()
        memory.write_spared()
        # Commits only when there is no commit yet or the tree differs from HEAD.
        head = memory.snapshot(BASELINE_LABEL).encode()
        base = memory.base()
        if base is None:
            memory.set_base(head)
            base = head
        return base.decode()

    def recover(self) -> None:
        if self.memory.is_repository():
            self.memory.clear_stale_locks()

    def snapshot(self, label: str) -> str:
        return self.memory.snapshot(label)

    def restore(self, token: str) -> None:
        self.memory.restore(token)

    def apply(self) -> ApplyOutcome:
        return ApplyOutcome(ok=True)

    def last_commit_sha(self) -> str | None:
        if self.memory.kept is not None:
            return self.memory.kept
        head = self.memory.head() if self.memory.is_repository() else None
        return None if head is None else head.decode()

    def changed_paths(self) -> list[str]:
        return self.memory.changed_paths()
