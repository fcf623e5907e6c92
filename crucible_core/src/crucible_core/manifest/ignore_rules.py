"""Whether the run's own directories are kept out of the user's repository by its ignore files.

`crucible init` writes the workspace and state directories into `.gitignore`, and `crucible
check` warns when they are not ignored: otherwise the `git add -A` a first commit uses adds
the run's state (its log then travels in every commit and clone of the repository) and the
workspace (a git repository of its own, added as an embedded one). This is a reading of `.gitignore`
files and `.git/info/exclude`, not of git itself: the usual patterns (names, anchored paths,
`*` and `**`, `!` negation) are understood; a user's global excludes file is not read.
"""

from __future__ import annotations

import fnmatch
from pathlib import Path

from crucible_core.agent_files import AgentFileRefused, read_regular

MAX_IGNORE_FILE_BYTES = 1 << 20


def repository_root(start: Path) -> Path | None:
    """The nearest directory at or above `start` that holds a `.git` (directory or file), or None."""
    here = start.resolve()
    for candidate in (here, *here.parents):
        if (candidate / ".git").exists():
            return candidate
    return None


def _patterns(path: Path) -> list[str]:
    try:
        text = read_regular(path, MAX_IGNORE_FILE_BYTES).decode("utf-8", "replace")
    except (FileNotFoundError, AgentFileRefused):
        return []
    return [line.rstrip() for line in text.splitlines() if line.strip() and not line.startswith("#")]


def _matches(pattern: str, rel: str) -> bool:
    """Whether `pattern` (from an ignore file) ignores the directory `rel` (relative to that file's directory)."""
    pattern = pattern.rstrip("/")
    if pattern.startswith("**/"):
        pattern = pattern[3:]
    parts = rel.split("/")
    if "/" not in pattern:  # a name: matches that directory or any directory above it
        return any(fnmatch.fnmatchcase(part, pattern) for part in parts)
    pattern = pattern.lstrip("/")  # anchored at the ignore file's directory
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    return any(fnmatch.fnmatchcase(prefix, pattern) for prefix in prefixes)


def ignored(root: Path, rel: str) -> bool:
    """Whether the directory `rel` (posix, relative to the repository root `root`) is ignored.

    Reads `.git/info/exclude`, then each `.gitignore` from `root` down to `rel`'s parent; as in
    git, the last pattern that matches decides, and a `!pattern` takes a path back.
    """
    parts = rel.split("/")
    sources = [(root / ".git" / "info" / "exclude", rel)]
    for depth in range(len(parts)):
        here = "/".join(parts[:depth])
        sources.append((root / here / ".gitignore", "/".join(parts[depth:])))
    verdict = False
    for path, relative in sources:
        for pattern in _patterns(path):
            negated = pattern.startswith("!")
            if _matches(pattern[1:] if negated else pattern, relative):
                verdict = not negated
    return verdict


def unignored(root: Path, directories: list[Path]) -> list[str]:
    """Those of `directories` inside the repository at `root` that no ignore file covers, relative."""
    found = []
    for directory in directories:
        try:
            rel = directory.resolve().relative_to(root.resolve()).as_posix()
        except ValueError:
            continue  # outside the repository: git never sees it
        if rel != "." and not ignored(root, rel):
            found.append(rel)
    return found
