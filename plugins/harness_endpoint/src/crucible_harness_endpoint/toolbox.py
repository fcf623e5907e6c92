"""Putting the manifest's toolbox_dir where a CLI looks for project skills, before every turn."""

from __future__ import annotations

import os
from pathlib import Path

from crucible_core.errors import ManifestError
from crucible_core.manifest.containment import escape_problem, text_problem


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


def _real_directory(path: Path) -> None:
    """`path` as a directory of the workspace's own: made when missing, refused when it is a link."""
    if path.is_symlink():
        raise ToolboxError(f"{path} is a link: the toolbox is not copied through it")
    path.mkdir(mode=0o755, exist_ok=True)
    if not path.is_dir() or path.is_symlink():
        raise ToolboxError(f"{path} is not a directory")


def install_toolbox(toolbox: Path, workspace: Path, skills_dir: str) -> Path:
    """Copy the toolbox over `<workspace>/<skills_dir>`: copied, not linked, and again every turn,
    so the manifest's copy stays out of the agent's reach and an agent's edit to a toolbox skill
    does not outlive its turn. Skills the workspace already has stay.

    The skills directory outlives restores (it is spared), so what an earlier turn left there is
    the agent's: a directory on the way that is a link is refused, and each file is replaced (the
    old one unlinked, a new one created) rather than written into, so neither a link nor a hard
    link carries the copy outside the workspace.
    """
    if not toolbox.is_dir():
        raise ToolboxError(f"[agent].toolbox_dir {toolbox} is not a directory")
    target = workspace / skills_dir
    try:
        here = workspace
        for name in Path(skills_dir).parts:
            here = here / name
            _real_directory(here)
        for folder, _directories, files in os.walk(toolbox):  # not into the toolbox's own links
            here = target / Path(folder).relative_to(toolbox)
            _real_directory(here)
            for name in files:
                source = Path(folder) / name
                if source.is_symlink() or not source.is_file():
                    continue  # the toolbox's own links and specials are not skills' files
                destination = here / name
                if destination.is_symlink() or destination.is_file():
                    destination.unlink()
                fd = os.open(destination, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
                with os.fdopen(fd, "wb") as out:
                    out.write(source.read_bytes())
    except OSError as exc:
        raise ToolboxError(f"could not copy [agent].toolbox_dir {toolbox} into {target}: {exc}") from exc
    return target
