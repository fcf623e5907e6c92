"""Copying [workspace].inject files into the workspace: all of them at setup, frozen ones before every measure."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable
from pathlib import Path

from crucible_core.manifest.loader import ResolvedInject


def copy_injects(entries: Iterable[ResolvedInject], workspace: Path) -> list[str]:
    """Copy each entry to its destination (mode bits kept); return the destinations written."""
    written: list[str] = []
    for entry in entries:
        target = workspace / entry.destination
        if target.is_symlink() or (target.exists() and not target.is_file()):
            # An agent may have replaced the gate with a link or a directory: remove, then copy.
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)
            else:
                target.unlink()
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(entry.source, target)
        written.append(entry.destination)
    return written


def refresh_frozen(entries: Iterable[ResolvedInject], workspace: Path) -> list[str]:
    """Re-copy every frozen inject whose workspace copy differs, so a candidate cannot edit its gate."""
    stale: list[ResolvedInject] = []
    for entry in entries:
        if not entry.frozen:
            continue
        target = workspace / entry.destination
        try:
            same = (
                not target.is_symlink()
                and target.stat().st_size == entry.source.stat().st_size
                and target.read_bytes() == entry.source.read_bytes()
                and os.access(target, os.X_OK) == os.access(entry.source, os.X_OK)
            )
        except OSError:
            same = False
        if not same:
            stale.append(entry)
    return copy_injects(stale, workspace)
