"""The block of spared paths crucible keeps in the repository's info/exclude file."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from crucible_world_git.ignores import read_rules_file

BEGIN = "# >>> crucible: spared paths (managed by crucible, rewritten on every run)"
END = "# <<< crucible: spared paths"

_GLOB_SPECIALS = frozenset("*?[\\")


def exclude_pattern(path: str) -> str:
    """An exclude line matching exactly this workspace-relative path (a directory if it ends in /).

    Anchored with a leading slash, so "codegen-out/" spares only the top-level directory and
    not every directory of that name; glob characters are escaped so they match literally.
    """
    directory = path.endswith("/")
    core = path.strip("/")
    escaped = "".join("\\" + ch if ch in _GLOB_SPECIALS else ch for ch in core)
    # git drops trailing spaces from a pattern unless each is escaped.
    bare = escaped.rstrip(" ")
    escaped = bare + "\\ " * (len(escaped) - len(bare))
    return "/" + escaped + ("/" if directory else "")


def render(existing: str, spared: Iterable[str]) -> str:
    """`existing` with crucible's block replaced by one listing `spared` (none: no block)."""
    kept: list[str] = []
    inside = False
    for line in existing.splitlines():
        if line == BEGIN:
            inside = True
        elif line == END and inside:
            inside = False
        elif not inside:
            kept.append(line)
    while kept and not kept[-1].strip():
        kept.pop()
    patterns = list(dict.fromkeys(exclude_pattern(p) for p in spared if p.strip("/")))
    if patterns:
        if kept:
            kept.append("")
        kept += [BEGIN, *patterns, END]
    return "\n".join(kept) + "\n" if kept else ""


def write_spared(exclude_file: Path, spared: Iterable[str]) -> bool:
    """Bring the exclude file's crucible block up to date; returns whether the file changed."""
    # Anything but a regular file there (a FIFO, a link) is replaced, never read or followed.
    existing = (read_rules_file(exclude_file) or b"").decode("utf-8", "surrogateescape")
    wanted = render(existing, spared)
    if wanted == existing:
        return False
    exclude_file.parent.mkdir(parents=True, exist_ok=True)
    tmp = exclude_file.with_name(exclude_file.name + ".crucible-tmp")
    tmp.write_text(wanted, encoding="utf-8", errors="surrogateescape")
    os.replace(tmp, exclude_file)
    return True
