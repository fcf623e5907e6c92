"""Which untracked paths git ignores: the workspace's .gitignore files and the repository's info/exclude.

Nothing outside the workspace decides what is kept: no `core.excludesFile`, no user-wide ignore
file, and matching is case-sensitive whatever `core.ignoreCase` says (the engine never reads
configuration; see engine_repo).

Two sources of rules. Before a run has a kept record (setting the workspace up, a probe), the
rules are the ones on disk. During a run they are the kept state's: the `.gitignore` files of
the kept tree, read from its objects, plus the exclude rules saved when the run started (and
the spared paths). A rule the agent writes into `.gitignore` decides nothing until a keep makes
it part of the kept tree, and one it writes into `.git/info/exclude` decides nothing at all:
what the candidate's own rules would hide is staged, measured and kept like the rest of it, and
a rollback cleans it away.

Either way an ignore file is read as a regular file only (a FIFO there never blocks the
engine, a link is never followed).
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from crucible_core.api import AgentFileRefused, read_regular
from crucible_world_git.index_file import MODE_EXEC, MODE_FILE, MODE_TREE
from crucible_world_git.loose_objects import parse_tree

if TYPE_CHECKING:
    from dulwich.ignore import IgnoreFilter, IgnoreFilterManager

# A .gitignore or exclude file larger than this is not a list of patterns anyone wrote.
MAX_RULES_BYTES = 16 << 20

# The .gitignore text of a directory (workspace-relative, "" for the top), or None.
Loader = Callable[[str], "bytes | None"]


def read_rules_file(path: Path | str | bytes) -> bytes | None:
    """An ignore file's bytes, or None when it is absent or not a small regular file."""
    try:
        return read_regular(path, MAX_RULES_BYTES)
    except (FileNotFoundError, NotADirectoryError, AgentFileRefused):
        return None


# Compiled filters by their file's text. The rules are built afresh for every stage (they follow
# the kept tree), but the texts rarely change; compiling every pattern again cost a few
# milliseconds a stage. A filter is not changed after it is built, so sharing one is safe; only
# small texts are kept, so an agent's huge .gitignore cannot pin memory.
_COMPILED: dict[bytes, IgnoreFilter] = {}
_COMPILED_MAX = 256
_COMPILED_TEXT_MAX = 64 << 10
# How many paths' answers one set of rules remembers (the same few untracked files, RESULTS.md
# say, are asked about at every stage while the kept tree stays the same).
_ANSWERS_MAX = 4096


def _filter(data: bytes) -> IgnoreFilter:
    from dulwich.ignore import IgnoreFilter, read_ignore_patterns

    compiled = _COMPILED.get(data)
    if compiled is None:
        compiled = IgnoreFilter(read_ignore_patterns(io.BytesIO(data)), ignorecase=False)
        if len(data) <= _COMPILED_TEXT_MAX:
            if len(_COMPILED) >= _COMPILED_MAX:
                _COMPILED.clear()
            _COMPILED[data] = compiled
    return compiled


_MANAGER: type[IgnoreFilterManager] | None = None  # the subclass below, made on first use


def _manager(top: str, loader: Loader, global_rules: list[bytes]) -> IgnoreFilterManager:
    global _MANAGER
    if _MANAGER is None:
        from dulwich.ignore import IgnoreFilterManager

        class Manager(IgnoreFilterManager):
            # dulwich opens each directory's .gitignore itself (following no link, but blocking
            # on a FIFO); the loader decides where the text comes from instead.
            loader: Loader

            def _load_path(self, path: str) -> IgnoreFilter | None:
                if path not in self._path_filters:
                    data = self.loader(path)
                    self._path_filters[path] = None if data is None else _filter(data)
                return self._path_filters[path]

        _MANAGER = Manager
    manager = _MANAGER(top, [_filter(data) for data in global_rules], ignorecase=False)
    manager.loader = loader  # type: ignore[attr-defined]
    return manager


def tree_loader(read: Callable[[bytes], tuple[bytes, bytes]], root_tree: bytes) -> Loader:
    """The .gitignore files of a tree object, looked up directory by directory as asked;
    `read(raw id)` gives an object's (kind, body)."""
    listings: dict[str, dict[bytes, tuple[int, bytes]] | None] = {}

    def listing(path: str) -> dict[bytes, tuple[int, bytes]] | None:
        if path in listings:
            return listings[path]
        if not path:
            sha: bytes | None = root_tree
        else:
            parent, _, name = path.rpartition("/")
            above = listing(parent)
            entry = above.get(os.fsencode(name)) if above else None
            sha = entry[1] if entry is not None and entry[0] == MODE_TREE else None
        found = None
        if sha is not None:
            found = {name: (mode, child) for name, mode, child in parse_tree(read(sha)[1])}
        listings[path] = found
        return found

    def load(path: str) -> bytes | None:
        entry = (listing(path) or {}).get(b".gitignore")
        if entry is None or entry[0] not in (MODE_FILE, MODE_EXEC):
            return None
        return read(entry[1])[1]

    return load


class IgnoreRules:
    """The ignore rules in force for one operation (build a fresh one after the rules changed).

    Paths are workspace-relative bytes. A directory is pruned only when a pattern excludes the
    directory itself, as git decides; files inside a walked directory are asked one by one.
    """

    def __init__(self, top: str, loader: Loader, global_rules: list[bytes]) -> None:
        self._manager = _manager(top, loader, global_rules)
        self._files: dict[bytes, bool] = {}  # answers so far: the rules do not change

    @classmethod
    def on_disk(cls, top: str, exclude_file: str) -> IgnoreRules:
        """The rules as the working tree and the repository hold them now (no run to protect yet)."""

        def loader(path: str) -> bytes | None:
            return read_rules_file(os.path.join(top, path, ".gitignore"))

        exclude = read_rules_file(exclude_file)
        return cls(top, loader, [] if exclude is None else [exclude])

    def ignores_file(self, path: bytes) -> bool:
        ignored = self._files.get(path)
        if ignored is None:
            ignored = self._manager.is_ignored(os.fsdecode(path)) is True
            if len(self._files) < _ANSWERS_MAX:  # an agent's million untracked files pin nothing
                self._files[path] = ignored
        return ignored

    def prunes_dir(self, path: bytes) -> bool:
        return self._manager.may_prune_directory(os.fsdecode(path) + "/")
