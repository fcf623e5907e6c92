"""Putting the manifest's toolbox_dir where a CLI looks for project skills, before every turn."""

from __future__ import annotations

from pathlib import Path

from crucible_core.api import ManifestError, copy_tree_into, escape_problem, text_problem


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


def install_toolbox(toolbox: Path, workspace: Path, skills_dir: str) -> Path:
    """Copy the toolbox over `<workspace>/<skills_dir>`: copied, not linked, and again every turn,
    so the manifest's copy stays out of the agent's reach and an agent's edit to a toolbox skill
    does not outlive its turn. Skills the workspace already has stay.

    The skills directory outlives restores (it is spared), so what an earlier turn left there is
    the agent's: the copy never writes through a link or a hard link planted there (a link where
    a directory belongs is replaced by a real directory; a file is replaced, not written into).
    """
    if not toolbox.is_dir():
        raise ToolboxError(f"[agent].toolbox_dir {toolbox} is not a directory")
    target = workspace / skills_dir
    try:
        copy_tree_into(toolbox, workspace, skills_dir)
    except OSError as exc:
        raise ToolboxError(f"could not copy [agent].toolbox_dir {toolbox} into {target}: {exc}") from exc
    return target
