"""Putting the manifest's toolbox_dir where Claude Code finds skills: <workspace>/.claude/skills."""

from __future__ import annotations

import shutil
from pathlib import Path

SKILLS_DIR = Path(".claude") / "skills"


class ToolboxError(Exception):
    """The toolbox named by the manifest is missing or cannot be copied."""


def resolve_toolbox(toolbox_dir: str | None, manifest_dir: Path) -> Path | None:
    if not toolbox_dir:
        return None
    path = Path(toolbox_dir)
    return path if path.is_absolute() else (manifest_dir / path).resolve()


def install_toolbox(toolbox: Path, workspace: Path) -> Path:
    """Copy the toolbox over the workspace's skills directory before every turn.

    Copied (not linked) so the manifest's toolbox stays out of the agent's reach, and copied
    again each turn because restores spare `.claude/`: an edit the agent made to a toolbox
    skill must not outlive its turn. Skills the workspace already had are left in place.
    """
    if not toolbox.is_dir():
        raise ToolboxError(f"[agent].toolbox_dir {toolbox} is not a directory")
    target = workspace / SKILLS_DIR
    try:
        shutil.copytree(toolbox, target, symlinks=False, dirs_exist_ok=True)
    except OSError as exc:
        raise ToolboxError(f"could not copy [agent].toolbox_dir {toolbox} into {target}: {exc}") from exc
    return target
