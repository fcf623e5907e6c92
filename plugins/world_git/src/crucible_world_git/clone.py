"""The default workspace setup: clone [repo] (a path or URL) with dulwich and check out a ref."""

from __future__ import annotations

import io
import os
from pathlib import Path

from crucible_core.api import RunFailed, WorkspaceError
from crucible_world_git.dulwich_names import object_id, ref
from crucible_world_git.git_memory import GitMemory


def clone_into(memory: GitMemory, source: str, ref: str | None) -> None:
    workspace = memory.workspace
    if workspace.exists() and any(workspace.iterdir()):
        raise WorkspaceError(
            f"cannot clone into {workspace}: the directory is not empty",
            hint="remove it, or point [workspace].dir somewhere else",
        )
    workspace.mkdir(parents=True, exist_ok=True)
    from dulwich import porcelain

    location = source
    if "://" not in source and not source.startswith("git@") and Path(source).exists():
        location = os.path.abspath(source)
        if Path(location).is_dir() and not (Path(location) / ".git").exists():
            raise RunFailed(
                f"cannot clone {source}: it is not a git repository",
                hint="run `printf '/workspace/\\n/state/\\n' >> .gitignore && git init && git add -A && "
                "git commit -m start` there (the ignore lines keep crucible's own workspace and state "
                "out of the commit), or point [repo].path at a repository",
            )
    try:
        repo = porcelain.clone(location, str(workspace), checkout=False, errstream=io.BytesIO())
    except Exception as exc:  # dulwich raises many kinds (transport, protocol, OS): all mean "no clone"
        raise RunFailed(
            f"could not clone {source}: {exc}",
            hint="check [repo].url or [repo].path and that it is reachable from here",
        ) from exc
    repo.close()
    if ref:
        _point_head_at(memory, ref)
    head = memory.head()
    if head is not None:
        memory.restore(head.decode())


def _point_head_at(memory: GitMemory, wanted: str) -> None:
    """Like `git checkout ref` after a clone: a branch gets a local branch, anything else detaches."""
    refs = memory.repo.refs
    name = wanted.encode()
    for branch in (ref(b"refs/remotes/origin/" + name), ref(b"refs/heads/" + name)):
        if branch in refs:
            local = ref(b"refs/heads/" + name)
            if local not in refs:
                refs[local] = refs[branch]
            refs.set_symbolic_ref(ref(b"HEAD"), local)
            return
    commit = memory.resolve_commit(wanted)
    del refs[ref(b"HEAD")]
    refs[ref(b"HEAD")] = object_id(commit)
