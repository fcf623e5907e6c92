"""Putting the manifest's toolbox_dir where Claude Code finds skills: <workspace>/.claude/skills."""

from __future__ import annotations

from pathlib import Path

from crucible_core.api import ManifestError, copy_tree_into, escape_problem, text_problem

SKILLS_DIR = Path(".claude") / "skills"


class ToolboxError(Exception):
    """The toolbox named by the manifest is missing or cannot be copied."""


def resolve_toolbox(toolbox_dir: str | None, manifest_dir: Path) -> Path | None:
    """The toolbox directory, which must lie under the manifest directory and exist."""
    if not toolbox_dir:
        return None
    problem = text_problem(toolbox_dir) or escape_problem(manifest_dir, toolbox_dir)
    if problem:
        raise ManifestError(f"[agent].toolbox_dir = {toolbox_dir!r} {problem}")
    path = (manifest_dir / toolbox_dir).resolve()
    if not path.is_dir():
        raise ManifestError(
            f"[agent].toolbox_dir names {toolbox_dir!r}, which is not a directory under {manifest_dir}"
        )
    return path


def install_toolbox(toolbox: Path, workspace: Path) -> Path:
    """Copy the toolbox over the workspace's skills directory before every turn.

    Copied (not linked) so the manifest's toolbox stays out of the agent's reach, and copied
    again each turn because restores spare `.claude/`: an edit the agent made to a toolbox
    skill must not outlive its turn. Skills the workspace already had are left in place. What an
    earlier turn left there is the agent's, so the copy never writes through a link or a hard
    link it planted (a link where a directory belongs is replaced by a real directory).
    """
    if not toolbox.is_dir():
        raise ToolboxError(f"[agent].toolbox_dir {toolbox} is not a directory")
    target = workspace / SKILLS_DIR
    try:
        copy_tree_into(toolbox, workspace, SKILLS_DIR.as_posix())
    except OSError as exc:
        raise ToolboxError(f"could not copy [agent].toolbox_dir {toolbox} into {target}: {exc}") from exc
    return target
