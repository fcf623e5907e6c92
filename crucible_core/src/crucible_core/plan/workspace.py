"""Disposable copies of a workspace for isolated tasks, and the protocol a World provides them by.

An isolated task runs in a private copy that holds the workspace's current (uncommitted)
state; its edits never reach the shared workspace. A World plugin can offer cheaper copies
(a git worktree); a standalone plan without a World uses a plain temp-dir copy.
"""

from __future__ import annotations

import filecmp
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

from crucible_core.agent_files import AgentFileRefused, read_regular

MAX_DIFF_BYTES = 256 * 1024


class DisposableCopy(Protocol):
    path: Path

    def diff(self) -> str:
        """What the task changed, as a unified diff (bounded); informational only."""
        ...

    def discard(self) -> None: ...


class DisposableCopies(Protocol):
    """Make a private copy of the workspace for one task; the World's own or a temp dir."""

    def make_copy(self, label: str) -> DisposableCopy: ...


class TempDirCopy:
    def __init__(self, original: Path, path: Path, root: Path) -> None:
        self.original = original
        self.path = path
        self._root = root

    def diff(self) -> str:
        chunks: list[str] = []
        size = 0
        for rel in _changed(self.original, self.path):
            before = _lines(self.original / rel)
            after = _lines(self.path / rel)
            import difflib  # for a diff only, so not imported at start-up

            text = "".join(difflib.unified_diff(before, after, f"a/{rel}", f"b/{rel}"))
            size += len(text)
            if size > MAX_DIFF_BYTES:
                chunks.append("... (diff truncated)\n")
                break
            chunks.append(text)
        return "".join(chunks)

    def discard(self) -> None:
        shutil.rmtree(self._root, ignore_errors=True)


class TempDirCopies:
    """Copies the workspace into a fresh temp dir, leaving out the named paths (the state dir)."""

    def __init__(self, workspace: Path, exclude: Iterable[Path] = ()) -> None:
        self.workspace = workspace.resolve()
        self.exclude = {p.resolve() for p in exclude}

    def make_copy(self, label: str) -> TempDirCopy:
        root = Path(tempfile.mkdtemp(prefix=f"crucible-task-{_safe(label)}-"))
        target = root / "workspace"

        def ignore(directory: str, names: list[str]) -> list[str]:
            base = Path(directory).resolve()
            return [name for name in names if (base / name) in self.exclude]

        shutil.copytree(self.workspace, target, symlinks=True, ignore=ignore)
        return TempDirCopy(self.workspace, target, root)


def _safe(label: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in label)[:40]


def _lines(path: Path) -> list[str]:
    # the task wrote the copy: a FIFO or a link there is not read, and no file costs more than the diff's bound
    try:
        return read_regular(path, MAX_DIFF_BYTES).decode("utf-8", "replace").splitlines(keepends=True)
    except (OSError, AgentFileRefused):
        return []


def _changed(left: Path, right: Path, rel: str = "") -> list[str]:
    found: list[str] = []
    try:
        compare = filecmp.dircmp(left / rel if rel else left, right / rel if rel else right)
    except OSError:
        return found
    prefix = f"{rel}/" if rel else ""
    found += [prefix + name for name in compare.diff_files + compare.right_only + compare.left_only]
    for sub in compare.common_dirs:
        found += _changed(left, right, prefix + sub)
    return sorted(found)
