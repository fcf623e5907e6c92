"""Reading a file as the workspace's pristine base commit (refs/crucible/base) recorded it."""

from __future__ import annotations

import os
from pathlib import Path

from crucible_world_git.dulwich_names import ref
from crucible_world_git.git_memory import BASE_REF
from crucible_world_git.index_file import MODE_TREE
from crucible_world_git.loose_objects import ObjectDatabase, commit_tree_id, parse_tree


def read_pristine(workspace: Path, relpath: str) -> bytes | None:
    """The blob at `relpath` in the base commit's tree; None when any step of the way is absent."""
    if not os.path.lexists(os.path.join(workspace, ".git")):
        return None
    from dulwich.errors import NotGitRepository
    from dulwich.repo import Repo

    try:
        repo = Repo(str(workspace))
    except (NotGitRepository, OSError):
        return None
    with repo:
        try:
            base = repo.refs[ref(BASE_REF)]
        except KeyError:
            return None
        db = ObjectDatabase(repo.object_store)  # a Repo on disk always has a DiskObjectStore
        try:
            kind, body = db.read(bytes.fromhex(base.decode()))
            if kind != b"commit":
                return None
            sha, mode = commit_tree_id(body), MODE_TREE
            for part in os.fsencode(relpath).strip(b"/").split(b"/"):
                if mode != MODE_TREE or part in (b"", b".", b".."):
                    return None
                _, tree = db.read(sha)
                found = next(((m, s) for name, m, s in parse_tree(tree) if name == part), None)
                if found is None:
                    return None
                mode, sha = found
            if mode == MODE_TREE or mode == 0o160000:
                return None
            kind, data = db.read(sha)
        except Exception:  # a damaged or partial repository: the caller falls back to the tree
            return None
        return data if kind == b"blob" else None
