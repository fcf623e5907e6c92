"""Preparing the workspace before the loop: setup_cmd or the world's clone, the injects, the base commit."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from crucible_core.errors import RunFailed, WorkspaceError
from crucible_core.manifest.loader import LoadedComponent, LoadedManifest
from crucible_core.manifest.paths import RunPaths
from crucible_core.protocols import AssembledWorld, LocalSource, World
from crucible_core.run.injects import copy_injects
from crucible_core.session_log import log_size
from crucible_core.shell import Shell

SETUP_TIMEOUT = 3600.0


def workspace_in_use(workspace: Path) -> bool:
    return workspace.exists() and (not workspace.is_dir() or any(workspace.iterdir()))


def refuse_existing_workspace(loaded: LoadedManifest, paths: RunPaths) -> None:
    """A fresh run never adopts a workspace it did not create: that could be someone's work."""
    if loaded.inside_workspace():
        return  # never reached (containment refuses it); never adopt the manifest's own checkout
    logged = log_size(paths.session_log) > 0
    earlier = _earlier_run(paths) if logged else ""
    if workspace_in_use(paths.workspace):
        raise WorkspaceError(
            f"workspace {paths.workspace} already exists{earlier}",
            hint="continue that run with --resume, or move the directory away to start fresh"
            if logged
            else f"{paths.session_log} holds no run to resume: move the directory away (it keeps its "
            "git history) to start fresh",
        )
    if logged:
        raise WorkspaceError(
            f"state directory {paths.state_dir} already holds a session log{earlier}",
            hint="continue that run with --resume, or move the state directory away to start fresh",
        )


def _earlier_run(paths: RunPaths) -> str:
    """How the run already recorded there ended, for the refusal: a user who fixed the manifest
    after a failed first run learns that --resume picks it up (a failed baseline is measured
    again) rather than guessing why a plain rerun is refused."""
    from crucible_core.contract.fold import fold_path

    try:
        folded = fold_path(paths.session_log)
    except (OSError, ValueError):
        return ""
    if folded.outcome is None:
        return ": a run recorded there has no shutdown line (it is live, or it died)"
    return f": the run recorded there ended {folded.outcome} after iteration {folded.iteration}"


def local_source(loaded: LoadedManifest, paths: RunPaths) -> LocalSource | None:
    """The local repository a fresh run clones, or None (a URL, a setup_cmd, the workspace itself)."""
    m = loaded.manifest
    if loaded.inside_workspace() or m.workspace.setup_cmd or m.repo is None or m.repo.path is None:
        return None
    # the run's own files, and what it reads from the checkout as it is now (the manifest, the injects)
    own = (paths.workspace, paths.state_dir, paths.steer_file, loaded.path.resolve())
    injects = tuple(entry.source.resolve() for entry in loaded.injects)
    path = (paths.manifest_dir / m.repo.path).resolve()
    return LocalSource(path, m.repo.path, m.repo.start_from, own + injects)


def source_notice(loaded: LoadedManifest, paths: RunPaths, world: World) -> tuple[str, str] | None:
    """What the world says, as (level, text), about the local repository a fresh run clones."""
    source = local_source(loaded, paths)
    tell = getattr(world, "source_notice", None)
    return tell(source) if source is not None and tell is not None else None


def setup_component(
    component: LoadedComponent, paths: RunPaths, clone: Callable[[str, str | None], None], shell: Shell
) -> None:
    """A component's workspace, made as its own domain makes it, in the assembled workspace.

    Its setup_cmd runs in a scratch copy of its domain directory (so the domain is reused
    verbatim and left untouched) and the workspace it creates moves into place; without one,
    its [repo] is cloned by `clone(source, ref)` (the component's world, or a playbook's
    workspace memory). Its own injects (its own gate) play no part: the composite's gate
    scores the assembly, and a composite playbook has none.
    """
    m = component.loaded.manifest
    target = paths.workspace / component.name
    if m.workspace.setup_cmd:
        scratch = paths.private_dir / "component-setup" / component.name
        shutil.rmtree(scratch, ignore_errors=True)
        domain = component.loaded.dir
        shutil.copytree(
            domain,
            scratch,
            symlinks=True,
            ignore=shutil.ignore_patterns(m.workspace.dir.split("/")[0], "state", ".git"),
        )
        done = shell.run(m.workspace.setup_cmd, cwd=scratch, timeout=SETUP_TIMEOUT)
        made = (scratch / m.workspace.dir).resolve()
        if not done.ok or not made.is_dir() or not made.is_relative_to(scratch):
            tail = done.stderr.strip().splitlines()[-3:]
            shutil.rmtree(scratch, ignore_errors=True)
            raise RunFailed(
                f"component {component.name!r}: setup_cmd {done.describe_failure() if not done.ok else 'made no workspace'}"
                f": {' | '.join(tail) or 'no stderr'}",
                hint=f"run the setup_cmd by hand in {domain} to see why",
            )
        shutil.move(made, target)
        shutil.rmtree(scratch, ignore_errors=True)
    elif m.repo is not None:
        source = m.repo.url or str((component.loaded.dir / (m.repo.path or ".")).resolve())
        clone(source, m.repo.ref)
    else:
        target.mkdir(parents=True, exist_ok=True)


def prepare_workspace(loaded: LoadedManifest, paths: RunPaths, world: World, shell: Shell) -> str:
    """Create the workspace, apply every inject, and return the pristine base commit id."""
    m = loaded.manifest
    if loaded.components:
        assert isinstance(world, AssembledWorld)
        paths.workspace.mkdir(parents=True, exist_ok=True)
        for component in loaded.components:
            setup_component(component, paths, world.part(component.name).clone_from, shell)
    elif not loaded.inside_workspace():
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
            local = local_source(loaded, paths)
            if m.repo.start_from == "worktree" and local is not None:
                clone_working_tree = getattr(world, "clone_working_tree", None)
                if clone_working_tree is None:
                    raise RunFailed(
                        '[repo] start_from = "worktree" needs a world that can read the working tree',
                        hint='use the git world, or start_from = "head" with the changes committed',
                    )
                clone_working_tree(local)
            else:
                world.clone_from(
                    m.repo.url or str((paths.manifest_dir / (m.repo.path or ".")).resolve()), m.repo.ref
                )
        else:
            paths.workspace.mkdir(parents=True, exist_ok=True)
    copy_injects(loaded.injects, paths.workspace)
    return world.prepare()
