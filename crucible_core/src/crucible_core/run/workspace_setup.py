"""Preparing the workspace before the loop: setup_cmd or the default clone, the injects, the base commit."""

from __future__ import annotations

from pathlib import Path

from crucible_core.errors import RunFailed, WorkspaceError
from crucible_core.manifest.loader import LoadedManifest
from crucible_core.manifest.paths import RunPaths
from crucible_core.protocols import World
from crucible_core.run.injects import copy_injects
from crucible_core.shell import Shell

SETUP_TIMEOUT = 3600.0


def workspace_in_use(workspace: Path) -> bool:
    return workspace.exists() and (not workspace.is_dir() or any(workspace.iterdir()))


def refuse_existing_workspace(loaded: LoadedManifest, paths: RunPaths) -> None:
    """A fresh run never adopts a workspace it did not create: that could be someone's work."""
    if loaded.inside_workspace():
        return  # the bring-your-own-repo on-ramp: the workspace is the manifest's own repository
    if workspace_in_use(paths.workspace):
        raise WorkspaceError(
            f"workspace {paths.workspace} already exists",
            hint="continue that run with --resume, or move the directory away to start fresh",
        )
    if paths.session_log.exists() and paths.session_log.stat().st_size > 0:
        raise WorkspaceError(
            f"state directory {paths.state_dir} already holds a session log",
            hint="continue that run with --resume, or move the state directory away to start fresh",
        )


def prepare_workspace(loaded: LoadedManifest, paths: RunPaths, world: World, shell: Shell) -> str:
    """Create the workspace, apply every inject, and return the pristine base commit id."""
    m = loaded.manifest
    if not loaded.inside_workspace():
        if m.workspace.setup_cmd:
            done = shell.run(m.workspace.setup_cmd, cwd=paths.manifest_dir, timeout=SETUP_TIMEOUT)
            if not done.ok:
                tail = done.stderr.strip().splitlines()[-3:]
                raise RunFailed(
                    f"setup_cmd {done.describe_failure()}: {' | '.join(tail) or 'no stderr'}",
                    hint="run the setup_cmd by hand in the manifest directory to see why",
                )
            if not paths.workspace.is_dir():
                raise RunFailed(
                    f"setup_cmd finished but did not create the workspace {paths.workspace}",
                    hint="make setup_cmd create [workspace].dir",
                )
        elif m.repo is not None:
            source = m.repo.url or str((paths.manifest_dir / (m.repo.path or ".")).resolve())
            world.clone_from(source, m.repo.ref)
        else:
            paths.workspace.mkdir(parents=True, exist_ok=True)
    copy_injects(loaded.injects, paths.workspace)
    return world.prepare()
