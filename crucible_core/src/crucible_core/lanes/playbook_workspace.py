"""A playbook's workspace: made from [repo] or [workspace].setup_cmd as the loop makes its own, or rebuilt on resume.

The pristine start, as the loop's setup has it:
- `[workspace].setup_cmd` runs in the manifest directory and must create the workspace;
- otherwise `[repo]` is cloned at `[repo].ref` (a URL, or a local repository when `start_from`
  is "head", its default: committed history only); a local `path` that is not a git repository,
  or `start_from = "worktree"` without a ref, is copied as its working tree stands;
- with neither, the workspace starts empty.
Then every inject is copied in. A resume rebuilds the pristine start (the git memory's base
commit) and puts back the declared files of every task that passed in the shared workspace.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from crucible_core import process
from crucible_core.errors import RunFailed, UnsupportedSectionError, WorkspaceError
from crucible_core.manifest.loader import LoadedManifest
from crucible_core.plan.executor import PriorRun
from crucible_core.plan.files import FileStore
from crucible_core.run.git_memory import ENGINE_CONFIG, GIT_ENV, GitMemory
from crucible_core.run.injects import copy_injects
from crucible_core.run.workspace_setup import SETUP_TIMEOUT, workspace_in_use

CLONE_TIMEOUT = 600.0


def refuse_unsupported_repo(loaded: LoadedManifest) -> None:
    """A [repo] shape a playbook cannot honour is refused by name before anything is made."""
    repo = loaded.manifest.repo
    if repo is not None and repo.ref is not None and repo.start_from == "worktree" and repo.path is not None:
        raise UnsupportedSectionError(
            f"{loaded.path}: a playbook does not start from a working tree at a ref "
            '([repo] start_from = "worktree" with ref)',
            hint='drop ref to start from the working tree, or start_from = "head" to start from the ref',
        )


def refuse_existing_workspace(loaded: LoadedManifest) -> None:
    """A fresh playbook never adopts a workspace it did not make (unless it is the manifest's own)."""
    workspace = loaded.workspace
    if workspace_in_use(workspace) and not loaded.inside_workspace():
        raise WorkspaceError(f"workspace {workspace} already exists", hint="move it away, or pass --resume")


def fresh_workspace(loaded: LoadedManifest, workspace: Path, env: dict[str, str]) -> None:
    """The pristine start (see the module's docstring), before the injects; a fresh run was
    refused before anything ran when something else stands there (refuse_existing_workspace)."""
    if loaded.inside_workspace() and workspace_in_use(workspace):
        return  # the manifest's own checkout is the start
    m = loaded.manifest
    repo = m.repo
    if m.workspace.setup_cmd:
        _run_setup(loaded, m.workspace.setup_cmd, workspace, env)
    elif repo is not None and repo.url is not None:
        _clone(repo.url, repo.ref, workspace, cwd=loaded.dir)
    elif repo is not None and repo.path is not None:
        source = loaded.resolve(repo.path)
        cloned = repo.ref is not None or (repo.start_from == "head" and (source / ".git").exists())
        if cloned:
            _clone(str(source), repo.ref, workspace, cwd=loaded.dir)
        else:
            if workspace.exists():
                workspace.rmdir()
            shutil.copytree(source, workspace, symlinks=True, ignore=shutil.ignore_patterns("state"))
    else:
        workspace.mkdir(parents=True, exist_ok=True)


def _run_setup(loaded: LoadedManifest, command: str, workspace: Path, env: dict[str, str]) -> None:
    done = process.run(command, cwd=loaded.dir, env=env, timeout=SETUP_TIMEOUT)
    if not done.ok:
        tail = done.stderr.strip().splitlines()[-3:]
        raise RunFailed(
            f"setup_cmd {done.describe_failure()}: {' | '.join(tail) or 'no stderr'}",
            hint="run the setup_cmd by hand in the manifest directory to see why",
        )
    if not workspace.is_dir():
        raise RunFailed(
            f"setup_cmd finished but did not create the workspace {workspace}",
            hint="make setup_cmd create [workspace].dir",
        )


def _git(args: list[str], cwd: Path, timeout: float) -> process.Completed:
    # No system or global config, hooks or fsmonitor; HOME stays unset so ssh finds its keys.
    env = {key: value for key, value in GIT_ENV.items() if key not in ("HOME", "XDG_CONFIG_HOME")}
    return process.run(["git", *ENGINE_CONFIG, *args], cwd=cwd, env=env, timeout=timeout)


def _clone(source: str, ref: str | None, workspace: Path, *, cwd: Path) -> None:
    if workspace.exists():
        workspace.rmdir()  # empty (checked above): git clones into a directory it makes
    done = _git(["clone", "--quiet", "--no-recurse-submodules", source, str(workspace)], cwd, CLONE_TIMEOUT)
    if not done.ok:
        raise WorkspaceError(f"git clone {source} {done.describe_failure()}: {done.stderr.strip()[-300:]}")
    if ref is None:
        return
    checkout = _git(["-C", str(workspace), "checkout", "--quiet", "--detach", ref, "--"], cwd, CLONE_TIMEOUT)
    if not checkout.ok:
        raise RunFailed(
            f"[repo].ref {ref!r} could not be checked out of {source}: {checkout.stderr.strip()[-300:]}",
            hint="name a branch, tag or commit the repository has",
        )


def rebuild_workspace(loaded: LoadedManifest, memory: GitMemory, env: dict[str, str]) -> bool:
    """Put the workspace back to the pristine start (its base commit, or a fresh start when the
    memory cannot give it back); False when the workspace is the manifest's own checkout."""
    if loaded.inside_workspace():
        return False  # the workspace is the manifest's own checkout: never delete it
    workspace = memory.workspace
    if not memory.reset_to_base():
        if os.path.lexists(workspace):
            shutil.rmtree(workspace)
        fresh_workspace(loaded, workspace, env)
    copy_injects(loaded.injects, workspace)
    return True


def replay_declared_files(memory: GitMemory, files: FileStore, shared: set[str], prior: PriorRun) -> None:
    """The declared files of every folded task that passed in the shared workspace, put back in
    the order the tasks settled, each committed as that task's, as the uninterrupted run did.

    An isolated task's files never reached the shared workspace (its dependents get them staged).
    """
    for name, result in prior.results.items():
        if result.status != "pass" or name not in shared:
            continue
        for rel, stored in files.captured(name):
            target = memory.workspace / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(stored, target)
        memory.settled(name, passed=True, quiescent=True)
