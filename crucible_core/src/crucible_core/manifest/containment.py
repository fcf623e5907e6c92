"""Where manifest paths may point: C-PATHS applied strictly, symlinks followed before judging.

A manifest is input a user may have copied from anywhere. Paths it names anchor at the
manifest directory and may not leave it (absolute, `..`, or a symlink resolving outside),
except `[repo].path` and the table form of an inject's `src`, which are only ever read
(cloned, copied) and may name a source elsewhere on purpose. The workspace, which the
engine resets and cleans, must be a directory strictly below the manifest directory and
apart from the state directory, so no discard can reach the manifest, its state or its
parent.
"""

from __future__ import annotations

import os
from pathlib import Path

# Linux limits: a path component of 255 bytes, a path of 4096. Anything near them is a mistake.
MAX_COMPONENT_BYTES = 255
MAX_PATH_BYTES = 1024
DEFAULT_STATE_DIR_NAME = "state"


def text_problem(value: str) -> str | None:
    """Why a path string cannot be used at all (before it is resolved), or None."""
    if not value:
        return "is empty"
    if any(not ch.isprintable() for ch in value):
        return "contains a control character"
    encoded = value.encode("utf-8", "surrogateescape")
    if len(encoded) > MAX_PATH_BYTES:
        return f"is longer than {MAX_PATH_BYTES} bytes"
    if any(len(part.encode("utf-8", "surrogateescape")) > MAX_COMPONENT_BYTES for part in value.split("/")):
        return f"has a path component longer than {MAX_COMPONENT_BYTES} bytes"
    return None


def is_within(path: Path, root: Path) -> bool:
    """Whether `path`, symlinks resolved, is `root` or below it."""
    try:
        path.resolve().relative_to(root.resolve())
    except (ValueError, OSError, RuntimeError):
        return False
    return True


def escape_problem(base: Path, value: str) -> str | None:
    """Why `value` leaves the manifest directory `base`, or None when it stays inside."""
    if os.path.isabs(value):
        return "is an absolute path; it must be relative to the manifest directory"
    if ".." in value.split("/"):
        return "climbs out with '..'; it must stay inside the manifest directory"
    if not is_within(base / value, base):
        return "resolves (through a symlink) outside the manifest directory"
    return None


def workspace_problem(base: Path, value: str) -> str | None:
    """Why `[workspace].dir` cannot be the workspace the engine resets and cleans, or None."""
    problem = text_problem(value) or escape_problem(base, value)
    if problem:
        return problem
    root = base.resolve()
    workspace = (base / value).resolve()
    if workspace == root:
        return (
            "is the manifest directory itself; a discard would reset and clean it (and the state "
            'directory inside it). Use a subdirectory such as "workspace"'
        )
    state = root / DEFAULT_STATE_DIR_NAME
    if is_within(workspace, state) or is_within(state, workspace):
        return f"overlaps the state directory {DEFAULT_STATE_DIR_NAME}/; pick another directory name"
    if workspace.exists() and not workspace.is_dir():
        return "names an existing file, not a directory"
    return None


def overlap_problem(workspace: Path, state_dir: Path) -> str | None:
    """Why a state directory cannot sit where it would be, relative to the workspace, or None."""
    if is_within(state_dir, workspace):
        return f"the state directory {state_dir} is inside the workspace {workspace}, where the agent could erase it"
    if is_within(workspace, state_dir):
        return f"the workspace {workspace} is inside the state directory {state_dir}"
    return None
