"""Preparing the workspace before the loop: setup_cmd or the default clone, the injects, the base commit."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import attrs

from crucible_core.errors import RunFailed, WorkspaceError
from crucible_core.manifest.loader import LoadedComponent, LoadedManifest
from crucible_core.manifest.paths import RunPaths
from crucible_core.protocols import AssembledWorld, SourceChanges, World
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


@attrs.frozen
class SourceNotice:
    """What `check` and a fresh run say about the repository a clone starts from."""

    level: str  # "warn": uncommitted files are left out; "info": they are carried in
    text: str


def _cloned_source(loaded: LoadedManifest, paths: RunPaths) -> Path | None:
    """The local repository a fresh run clones, or None (a URL, a setup_cmd, the workspace itself)."""
    m = loaded.manifest
    if loaded.inside_workspace() or m.workspace.setup_cmd or m.repo is None or m.repo.path is None:
        return None
    return (paths.manifest_dir / m.repo.path).resolve()


def uncommitted_changes(loaded: LoadedManifest, paths: RunPaths, world: World) -> SourceChanges | None:
    """The cloned repository's uncommitted files that a clone would really leave out.

    Not counted: the run's own workspace, state directory and steer file, and the files the run
    reads from the checkout anyway (the manifest, and every inject, copied in as it is now).
    """
    source = _cloned_source(loaded, paths)
    ask = getattr(world, "source_changes", None)
    if source is None or ask is None:
        return None
    changes = ask(str(source))
    if changes is None:
        return None
    read_anyway = [loaded.path.resolve(), *(entry.source.resolve() for entry in loaded.injects)]
    candidates = [paths.workspace, paths.state_dir, paths.steer_file, *read_anyway]
    own = [p for p in candidates if p.is_relative_to(source)]
    own_rel = [p.relative_to(source).as_posix() for p in own]
    kept = tuple(
        rel for rel in changes.paths if not any(rel == o or rel.startswith(o + "/") for o in own_rel)
    )
    return attrs.evolve(changes, paths=kept) if kept else None


def _listing(paths: tuple[str, ...], limit: int = 5) -> str:
    shown = ", ".join(paths[:limit])
    return shown + (f" and {len(paths) - limit} more" if len(paths) > limit else "")


def source_notice(loaded: LoadedManifest, paths: RunPaths, world: World) -> SourceNotice | None:
    changes = uncommitted_changes(loaded, paths, world)
    if changes is None:
        return None
    m = loaded.manifest
    assert m.repo is not None
    head = f"HEAD {changes.head[:12]}" if changes.head else "an empty tree"
    if m.repo.start_from == "worktree":
        return SourceNotice(
            "info",
            f"the run starts from the working tree of {m.repo.path}: {head} plus "
            f"{len(changes.paths)} uncommitted file(s) ({_listing(changes.paths)})",
        )
    what = "uncommitted changes" if changes.head else "no commit yet"
    return SourceNotice(
        "warn",
        f"the repository has {what}; the run starts from {head} without "
        f"{_listing(changes.paths)}: commit them, or set "
        '[repo] start_from = "worktree" to start from the working tree',
    )


def overlay_working_tree(source: Path, workspace: Path, changes: SourceChanges) -> None:
    """Make the fresh clone's files match the source's working tree for every changed path."""
    for rel in changes.paths:
        if ".." in Path(rel).parts or Path(rel).is_absolute():
            continue
        origin, target = source / rel, workspace / rel
        if not target.parent.resolve().is_relative_to(workspace.resolve()):
            continue  # a committed link on the way would lead out of the workspace
        if target.is_symlink() or target.is_file():
            target.unlink()
        elif target.is_dir():
            shutil.rmtree(target)
        if origin.is_symlink():
            target.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(os.readlink(origin), target)  # copied as a link, never followed
        elif origin.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(origin, target)
        # absent in the source: deleted in the working tree, so it stays deleted here


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
            source = m.repo.url or str((paths.manifest_dir / (m.repo.path or ".")).resolve())
            changes = uncommitted_changes(loaded, paths, world) if m.repo.start_from == "worktree" else None
            if m.repo.start_from == "worktree" and getattr(world, "source_changes", None) is None:
                raise RunFailed(
                    '[repo] start_from = "worktree" needs a world that can read the working tree',
                    hint='use the git world, or start_from = "head" with the changes committed',
                )
            world.clone_from(source, m.repo.ref)
            if changes is not None:
                overlay_working_tree(Path(source), paths.workspace, changes)
        else:
            paths.workspace.mkdir(parents=True, exist_ok=True)
    copy_injects(loaded.injects, paths.workspace)
    return world.prepare()
