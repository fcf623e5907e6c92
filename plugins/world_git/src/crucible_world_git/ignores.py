"""Which untracked paths git ignores: .gitignore files, info/exclude and the user's excludes file."""

from __future__ import annotations

import os
from contextlib import suppress
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dulwich.config import Config
    from dulwich.repo import Repo


class IgnoreRules:
    """The ignore rules as they are on disk now (build a fresh one after the tree changed).

    Paths are workspace-relative bytes. A directory is pruned only when a pattern excludes the
    directory itself, as git decides; files inside a walked directory are asked one by one.
    """

    def __init__(self, repo: Repo, config: Config, exclude_file: str) -> None:
        from dulwich.ignore import IgnoreFilter, IgnoreFilterManager, default_user_ignore_filter_path

        global_filters = []
        for path in (exclude_file, default_user_ignore_filter_path(config)):
            with suppress(OSError):
                global_filters.append(IgnoreFilter.from_path(os.path.expanduser(path)))
        ignorecase = config.get_boolean((b"core",), b"ignorecase", False)
        self._manager = IgnoreFilterManager(repo.path, global_filters, ignorecase)

    def ignores_file(self, path: bytes) -> bool:
        return self._manager.is_ignored(os.fsdecode(path)) is True

    def prunes_dir(self, path: bytes) -> bool:
        return self._manager.may_prune_directory(os.fsdecode(path) + "/")
