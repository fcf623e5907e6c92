"""A playbook's workspace: made from [repo] or [workspace].setup_cmd as the loop makes its own, or rebuilt on resume.

The pristine start, as the loop's setup has it:
- `[workspace].setup_cmd` runs in the manifest directory and must create the workspace;
- otherwise `[repo]` is cloned at `[repo].ref` (a URL, or a local repository when `start_from`
  is "head", its default: committed history only); a local `path` that is not a git repository,
  or `start_from = "worktree"` without a ref, is copied as its working tree stands;
- with neither, the workspace starts empty;
- a composite makes each component's workspace in `<workspace>/<component>` as the loop's
  composite does (its setup_cmd, or its [repo] cloned), each with its own workspace memory
  (composite.py).
Then every inject is copied in. A resume rebuilds the pristine start (the workspace memory's base
commit) and puts back the declared files of every task that passed in the shared workspace.

The clone and the history are the workspace memory's (a plugin's: the git world registers "git"),
so nothing here runs git.
"""

from __future__ import annotations

import functools
import os
import shutil
from typing import TYPE_CHECKING

from crucible_core.api import (
    INPUTS_DIR,
    RESULT_FILE,
    SETUP_TIMEOUT,
    PluginError,
    RunFailed,
    Shell,
    UnsupportedSectionError,
    WorkspaceError,
    WorkspaceMemoryContext,
    copy_injects,
    provider_of,
    run_process,
    setup_component,
    workspace_in_use,
)
from crucible_lane_playbook.composite import CompositeMemory

if TYPE_CHECKING:
    from pathlib import Path

    from crucible_core.api import (
        FileStore,
        LoadedManifest,
        Plugins,
        PriorRun,
        RunPaths,
        WorkspaceMemory,
        WorkspaceMemoryFactory,
    )

MEMORY = "git"  # the workspace memory a playbook keeps its history with
# Engine files a task leaves behind that belong to no commit.
ENGINE_FILES = (INPUTS_DIR.parts[0], RESULT_FILE)


def memory_factory(plugins: Plugins) -> WorkspaceMemoryFactory:
    """What makes the playbook's workspace memory, or a PluginError naming the distribution to install."""
    registry = plugins.registry("workspace memory")
    if MEMORY not in registry:
        raise PluginError(
            f"a playbook keeps its workspace's history in a {MEMORY!r} workspace memory, and no "
            "installed plugin registers one",
            hint=f"pip install {provider_of('workspace memory', MEMORY)}",
        )
    factory: WorkspaceMemoryFactory = registry.get(MEMORY, where="a playbook")
    return factory


def check_memory(plugins: Plugins) -> list[tuple[str, str]]:
    """`crucible check`'s finding about the playbook's workspace history: a failure (and why)
    when no installed plugin keeps it."""
    try:
        memory_factory(plugins)
    except PluginError as exc:
        return [("fail", exc.render())]
    return []


def workspace_memory(
    plugins: Plugins, loaded: LoadedManifest, workspace: Path, record_dir: Path
) -> WorkspaceMemory:
    """The playbook's workspace memory over `workspace`, its record kept in `record_dir`; for a
    composite, one per component over its directory, moved together."""
    factory = memory_factory(plugins)
    if not loaded.components:
        return factory(WorkspaceMemoryContext(workspace, record_dir, ENGINE_FILES))
    parts = tuple(
        (c.name, factory(WorkspaceMemoryContext(workspace / c.name, record_dir / c.name, ENGINE_FILES)))
        for c in loaded.components
    )
    return CompositeMemory(workspace, record_dir, parts)


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


def fresh_workspace(
    loaded: LoadedManifest, memory: WorkspaceMemory, env: dict[str, str], paths: RunPaths
) -> None:
    """The pristine start (see the module's docstring), before the injects; a fresh run was
    refused before anything ran when something else stands there (refuse_existing_workspace)."""
    workspace = memory.workspace
    if isinstance(memory, CompositeMemory):
        workspace.mkdir(parents=True, exist_ok=True)
        shell = Shell(cwd=workspace, env=env)
        for component in loaded.components:
            clone = functools.partial(memory.component(component.name).clone_from, cwd=component.loaded.dir)
            setup_component(component, paths, clone, shell)
        return
    if loaded.inside_workspace() and workspace_in_use(workspace):
        return  # the manifest's own checkout is the start
    m = loaded.manifest
    repo = m.repo
    if m.workspace.setup_cmd:
        _run_setup(loaded, m.workspace.setup_cmd, workspace, env)
    elif repo is not None and repo.url is not None:
        memory.clone_from(repo.url, repo.ref, cwd=loaded.dir)
    elif repo is not None and repo.path is not None:
        source = loaded.resolve(repo.path)
        cloned = repo.ref is not None or (repo.start_from == "head" and (source / ".git").exists())
        if cloned:
            memory.clone_from(str(source), repo.ref, cwd=loaded.dir)
        else:
            if workspace.exists():
                workspace.rmdir()
            shutil.copytree(source, workspace, symlinks=True, ignore=shutil.ignore_patterns("state"))
    else:
        workspace.mkdir(parents=True, exist_ok=True)


def _run_setup(loaded: LoadedManifest, command: str, workspace: Path, env: dict[str, str]) -> None:
    done = run_process(command, cwd=loaded.dir, env=env, timeout=SETUP_TIMEOUT)
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


def rebuild_workspace(
    loaded: LoadedManifest, memory: WorkspaceMemory, env: dict[str, str], paths: RunPaths
) -> bool:
    """Put the workspace back to the pristine start (its base commit, or a fresh start when the
    memory cannot give it back); False when the workspace is the manifest's own checkout."""
    if loaded.inside_workspace():
        return False  # the workspace is the manifest's own checkout: never delete it
    workspace = memory.workspace
    if not memory.reset_to_base():
        if os.path.lexists(workspace):
            shutil.rmtree(workspace)
        fresh_workspace(loaded, memory, env, paths)
    copy_injects(loaded.injects, workspace)
    return True


def replay_declared_files(
    memory: WorkspaceMemory, files: FileStore, shared: set[str], prior: PriorRun
) -> None:
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
