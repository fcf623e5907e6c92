"""The change between two kept states as a unified diff, read from the world's git memory."""

from __future__ import annotations

import io

from dulwich.objects import Commit
from dulwich.patch import write_tree_diff

from crucible_core.errors import RunFailed
from crucible_world_git.dulwich_names import object_id
from crucible_world_git.git_memory import GitMemory


def commit_change(memory: GitMemory, head: str, base: str | None) -> str:
    """`git diff base head` for two commits of the memory; base None means head's first parent."""
    if not memory.is_repository():
        raise RunFailed(f"{memory.workspace} is not a repository", hint="has the run set its workspace up?")
    head_id = memory.resolve_commit(head)
    new_tree = memory.tree_of(head_id)
    if base is None:
        head_commit = memory.repo[head_id]
        parents = head_commit.parents if isinstance(head_commit, Commit) else []
        old_tree = memory.tree_of(parents[0]) if parents else None
    else:
        old_tree = memory.tree_of(memory.resolve_commit(base))
    out = io.BytesIO()
    write_tree_diff(
        out, memory.repo.object_store, None if old_tree is None else object_id(old_tree), object_id(new_tree)
    )
    return out.getvalue().decode("utf-8", "replace")
