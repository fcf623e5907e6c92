"""The change between two kept states as a unified diff, read from the world's git memory."""

from __future__ import annotations

import io

from dulwich.objects import Commit
from dulwich.patch import write_object_diff

from crucible_core.api import RunFailed
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
    store = memory.repo.object_store
    out = io.BytesIO()
    changes = store.tree_changes(None if old_tree is None else object_id(old_tree), object_id(new_tree))
    for (old_path, new_path), (old_mode, new_mode), (old_sha, new_sha) in changes:
        write_object_diff(
            out, store, (shown_path(old_path), old_mode, old_sha), (shown_path(new_path), new_mode, new_sha)
        )
    return out.getvalue().decode("utf-8", "replace")


def shown_path(path: bytes | None) -> bytes | None:
    """A file name as the diff prints it: the agent chose it, so a byte that is not UTF-8 text, a
    control character or a backslash is written as git quotes it (`\\377`, `\\033`, `\\\\`)."""
    if path is None:
        return None
    text = path.decode("utf-8", "surrogateescape")
    if text.isprintable() and "\\" not in text:
        return path
    shown = []
    for char in text:
        if char == "\\":
            shown.append("\\\\")
        elif 0xDC80 <= ord(char) <= 0xDCFF:  # an undecodable byte, carried by surrogateescape
            shown.append(f"\\{ord(char) - 0xDC00:03o}")
        elif not char.isprintable():
            shown.extend(f"\\{byte:03o}" for byte in char.encode("utf-8"))
        else:
            shown.append(char)
    return "".join(shown).encode("utf-8")
