"""Copying [workspace].inject files into the workspace: all of them at setup, frozen ones before every measure.

Every copy goes through `crucible_core.workspace_files`, which never writes through a link or a
hard link the agent left at or above a destination.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Iterable
from pathlib import Path

from crucible_core.agent_files import file_status, outside_racy_window
from crucible_core.manifest.loader import ResolvedInject
from crucible_core.workspace_files import copy_file_into, destination_parts


def copy_injects(entries: Iterable[ResolvedInject], workspace: Path) -> list[str]:
    """Copy each entry to its destination (mode bits kept); return the destinations written."""
    written: list[str] = []
    for entry in entries:
        copy_file_into(entry.source, workspace, entry.destination)
        written.append(entry.destination)
    return written


# Per workspace copy: the status of it and of its source when their bytes were last found equal.
Verified = dict[str, tuple[tuple[int, ...], tuple[int, ...]]]


def _intact(entry: ResolvedInject, workspace: Path, verified: Verified | None = None) -> bool:
    """Whether the workspace copy is the source's own file, reached through real directories only.

    With `verified`, both files are read only when the status of either moved since their bytes
    were last found equal outside the racy window (agent_files.outside_racy_window): a write that
    kept the size still moves the ctime, which nobody can set back.
    """
    taken = time.time_ns()
    parts = destination_parts(entry.destination)
    current = workspace
    for name in parts[:-1]:
        current = current / name
        if not stat.S_ISDIR(os.lstat(current).st_mode):
            return False
    target = current / parts[-1]
    st = os.lstat(target)
    source = entry.source.stat()
    if not (
        stat.S_ISREG(st.st_mode)
        and st.st_nlink == 1  # a hardlink shares its bytes with some other path: replace it
        and st.st_size == source.st_size
        and stat.S_IMODE(st.st_mode) & 0o111 == stat.S_IMODE(source.st_mode) & 0o111
    ):
        return False
    seen = (file_status(st), file_status(source))
    key = str(target)
    if verified is not None and verified.get(key) == seen:
        return True
    same = target.read_bytes() == entry.source.read_bytes()
    if verified is not None:
        verified.pop(key, None)
        if (
            same
            and outside_racy_window(st.st_ctime_ns, taken)
            and outside_racy_window(source.st_ctime_ns, taken)
        ):
            verified[key] = seen
    return same


def refresh_frozen(
    entries: Iterable[ResolvedInject], workspace: Path, verified: Verified | None = None
) -> list[str]:
    """Re-copy every frozen inject whose workspace copy differs, so a candidate cannot edit its gate.

    `verified` (kept by the caller from one refresh to the next) spares reading both files while
    neither was touched since they were last found equal.
    """
    stale: list[ResolvedInject] = []
    for entry in entries:
        if not entry.frozen:
            continue
        try:
            same = _intact(entry, workspace, verified)
        except OSError:
            same = False
        if not same:
            stale.append(entry)
    return copy_injects(stale, workspace)
