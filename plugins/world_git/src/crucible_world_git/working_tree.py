"""Starting from a local repository's working tree: what a clone leaves out, what to say, the overlay.

A clone carries committed history only. `left_out` names the uncommitted files a clone of a
`LocalSource` would really miss, `notice` is what `check` and a fresh run say about them, and
`overlay_working_tree` copies them over the fresh clone for `[repo] start_from = "worktree"`.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import attrs

from crucible_core.api import LocalSource, SourceChanges
from crucible_world_git.source_status import source_changes


def left_out(source: LocalSource) -> SourceChanges | None:
    """The source's uncommitted files that a clone would really leave out, or None for none.

    Not counted: what the run writes there itself and the files it reads from the checkout
    anyway (`LocalSource.own`: the manifest and every inject are copied in as they are now).
    """
    changes = source_changes(str(source.path))
    if changes is None:
        return None
    own_rel = [p.relative_to(source.path).as_posix() for p in source.own if p.is_relative_to(source.path)]
    kept = tuple(
        rel for rel in changes.paths if not any(rel == o or rel.startswith(o + "/") for o in own_rel)
    )
    return attrs.evolve(changes, paths=kept) if kept else None


def _listing(paths: tuple[str, ...], limit: int = 5) -> str:
    shown = ", ".join(paths[:limit])
    return shown + (f" and {len(paths) - limit} more" if len(paths) > limit else "")


def notice(source: LocalSource) -> tuple[str, str] | None:
    """("info", ...) when a worktree start carries uncommitted files in, ("warn", ...) when a
    HEAD start leaves them out; None when the clone misses nothing."""
    changes = left_out(source)
    if changes is None:
        return None
    head = f"HEAD {changes.head[:12]}" if changes.head else "an empty tree"
    if source.start_from == "worktree":
        return (
            "info",
            f"the run starts from the working tree of {source.named}: {head} plus "
            f"{len(changes.paths)} uncommitted file(s) ({_listing(changes.paths)})",
        )
    what = "uncommitted changes" if changes.head else "no commit yet"
    return (
        "warn",
        f"the repository has {what}; the run starts from {head} without "
        f"{_listing(changes.paths)}: commit them, or set "
        '[repo] start_from = "worktree" to start from the working tree',
    )


def overlay_working_tree(source: Path, workspace: Path, changes: SourceChanges) -> None:
    """Make the fresh clone's files match the source's working tree for every changed path."""
    for rel in changes.paths:
        if ".." in Path(rel).parts or Path(rel).is_absolute():
            continue
        origin, target = source / rel, workspace / rel
        if not target.parent.resolve().is_relative_to(workspace.resolve()):
            continue  # a committed link on the way would lead out of the workspace
        if target.is_symlink() or target.is_file():
            target.unlink()
        elif target.is_dir():
            shutil.rmtree(target)
        if origin.is_symlink():
            target.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(os.readlink(origin), target)  # copied as a link, never followed
        elif origin.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(origin, target)
        # absent in the source: deleted in the working tree, so it stays deleted here
