"""Which untracked paths git ignores: the workspace's .gitignore files and the repository's info/exclude.

Nothing outside the workspace decides what is kept: no `core.excludesFile`, no user-wide ignore
file, and matching is case-sensitive whatever `core.ignoreCase` says (the engine never reads
configuration; see engine_repo).
"""

from __future__ import annotations

import os
from contextlib import suppress


class IgnoreRules:
    """The ignore rules as they are on disk now (build a fresh one after the tree changed).

    Paths are workspace-relative bytes. A directory is pruned only when a pattern excludes the
    directory itself, as git decides; files inside a walked directory are asked one by one.
    """

    def __init__(self, workspace: str, exclude_file: str) -> None:
        from dulwich.ignore import IgnoreFilter, IgnoreFilterManager

        global_filters = []
        with suppress(OSError):
            global_filters.append(IgnoreFilter.from_path(exclude_file))
        self._manager = IgnoreFilterManager(workspace, global_filters, False)

    def ignores_file(self, path: bytes) -> bool:
        return self._manager.is_ignored(os.fsdecode(path)) is True

    def prunes_dir(self, path: bytes) -> bool:
        return self._manager.may_prune_directory(os.fsdecode(path) + "/")
