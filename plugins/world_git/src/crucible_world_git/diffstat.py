"""A git-style diffstat computed from unified diff text (so any world's diff can be summarised)."""

from __future__ import annotations

import attrs

_BAR = 40


@attrs.define
class FileStat:
    path: str
    added: int = 0
    removed: int = 0
    binary: bool = False


def file_stats(diff: str) -> list[FileStat]:
    stats: list[FileStat] = []
    current: FileStat | None = None
    for line in diff.splitlines():
        if line.startswith("diff --git "):
            parts = line.split(" b/", 1)
            current = FileStat(parts[1] if len(parts) == 2 else line[len("diff --git ") :])
            stats.append(current)
        elif current is None or line.startswith(("+++ ", "--- ")):
            continue
        elif line.startswith("Binary files "):
            current.binary = True
        elif line.startswith("+"):
            current.added += 1
        elif line.startswith("-"):
            current.removed += 1
    return stats


def render_diffstat(diff: str) -> str:
    stats = file_stats(diff)
    if not stats:
        return " 0 files changed\n"
    width = max(len(s.path) for s in stats)
    most = max((s.added + s.removed for s in stats), default=0) or 1
    scale = min(1.0, _BAR / most)
    lines = []
    for s in stats:
        if s.binary:
            lines.append(f" {s.path.ljust(width)} | Bin")
            continue
        plus, minus = round(s.added * scale), round(s.removed * scale)
        lines.append(f" {s.path.ljust(width)} | {s.added + s.removed:>4} {'+' * plus}{'-' * minus}")
    added, removed = sum(s.added for s in stats), sum(s.removed for s in stats)
    files = f"{len(stats)} file{'s' if len(stats) != 1 else ''} changed"
    lines.append(
        f" {files}, {added} insertion{'s' if added != 1 else ''}(+), "
        f"{removed} deletion{'s' if removed != 1 else ''}(-)"
    )
    return "\n".join(lines) + "\n"


def summary_line(files: int, insertions: int, deletions: int) -> str:
    """git's one-line summary ("2 files changed, 3 insertions(+), 1 deletion(-)"); "" for no change.

    Like git, a zero count is left out, unless both are zero (only binary or mode changes).
    """
    if files == 0:
        return ""
    parts = [f"{files} file{'s' if files != 1 else ''} changed"]
    if insertions or not deletions:
        parts.append(f"{insertions} insertion{'s' if insertions != 1 else ''}(+)")
    if deletions or not insertions:
        parts.append(f"{deletions} deletion{'s' if deletions != 1 else ''}(-)")
    return ", ".join(parts)
