"""What a clone of a local repository would leave out: its uncommitted and untracked files."""

from __future__ import annotations

from pathlib import Path

from crucible_core.api import SourceChanges


def source_changes(source: str) -> SourceChanges | None:
    """HEAD of the repository at `source` and the files whose working-tree state differs from it.

    Read-only (no index refresh is written back). None when `source` is not a local
    repository; `head` is "" for a repository without a commit (every file is then listed).
    """
    if "://" in source or source.startswith("git@") or not (Path(source) / ".git").exists():
        return None
    from dulwich import porcelain
    from dulwich.errors import NotGitRepository

    from crucible_world_git.engine_repo import open_repo

    try:
        # With the engine's configuration: a filter driver or include in the source's config
        # (which a local agent can reach) never runs while the engine looks at it.
        with open_repo(source) as repo:
            try:
                head = repo.head().decode()
            except KeyError:
                head = ""  # no commit yet: a clone starts from an empty tree
            status = porcelain.status(repo, untracked_files="all", optional_locks=False)
    except (NotGitRepository, OSError):
        return None
    found: set[bytes] = set(status.unstaged) | set(status.untracked)
    for group in status.staged.values():
        found.update(group)
    paths = sorted({p.decode("utf-8", "surrogateescape").rstrip("/") for p in found})
    return SourceChanges(head=head, paths=tuple(paths))
