"""Workspace setup: prepare(), clone_from(), the exclude block and plugin registration."""

from __future__ import annotations

import importlib
import os
import time
from pathlib import Path

import pluggy
import pytest

from crucible_core.errors import RunFailed, WorkspaceError
from crucible_core.hookspecs import PROJECT
from crucible_core.manifest.models import WorldSection
from crucible_world_git.excludes import exclude_pattern, render
from crucible_world_git.gitworld import GitWorld
from tests.world_git.support import git, make_base, worktree, write


def test_prepare_turns_a_plain_directory_into_a_baseline(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    write(ws, "main.py", "print(1)\n")
    write(ws, "bin/tool", "#!/bin/sh\n", mode=0o755)
    write(ws, "RESULTS.md", "spared, never committed\n")
    world = GitWorld.at(ws, (".claude/", "RESULTS.md"))
    base = world.prepare()
    assert git(ws, "rev-parse", "HEAD").strip() == base
    assert git(ws, "rev-parse", "refs/crucible/base").strip() == base
    assert git(ws, "ls-tree", "-r", "--name-only", base).split() == ["bin/tool", "main.py"]
    assert "100755 blob" in git(ws, "ls-tree", base, "bin/tool")
    exclude = (ws / ".git/info/exclude").read_text()
    assert "/.claude/\n/RESULTS.md\n" in exclude
    assert world.last_commit_sha() == base


def test_prepare_again_keeps_the_pristine_base_and_commits_a_dirty_tree(tmp_path: Path) -> None:
    ws = make_base(tmp_path / "ws")
    head = git(ws, "rev-parse", "HEAD").strip()
    first = GitWorld.at(ws, ()).prepare()
    assert first == head  # a clean tree is its own baseline: no commit
    write(ws, "README.md", "edited between runs\n")
    second = GitWorld.at(ws, ("gen/",))
    assert second.prepare() == head  # the recorded pristine base, not the new commit
    assert git(ws, "rev-parse", "HEAD~1").strip() == head
    assert git(ws, "show", "HEAD:README.md") == "edited between runs\n"
    assert "/gen/" in (ws / ".git/info/exclude").read_text()


def test_the_baseline_commit_is_a_function_of_its_tree_and_parent(tmp_path: Path) -> None:
    """Two setups of the same tree, seconds apart, make the same base commit: `crucible scope`
    freezes the RunIdentity digest (which names the base) before the run that makes it again."""
    source = make_base(tmp_path / "source")
    made = []
    for attempt, wait in enumerate((0.0, 1.1)):
        time.sleep(wait)  # a base stamped with the clock would differ by now
        plain = tmp_path / f"plain{attempt}"
        write(plain, "main.py", "print(1)\n")
        on_a_clone = tmp_path / f"clone{attempt}"
        git(tmp_path, "clone", "-q", str(source), str(on_a_clone))
        write(on_a_clone, "injected.sh", "#!/bin/sh\n", mode=0o755)
        made.append((GitWorld.at(plain, ()).prepare(), GitWorld.at(on_a_clone, ()).prepare()))
    assert made[0] == made[1]
    clone = tmp_path / "clone1"
    parent_time = git(clone, "log", "-1", "--format=%ct", "HEAD~1").strip()
    assert git(clone, "log", "-1", "--format=%ct %at", "HEAD").split() == [parent_time, parent_time]
    assert git(tmp_path / "plain1", "log", "-1", "--format=%ct", "HEAD").strip() == "0"  # no parent


def test_exclude_block_is_replaced_not_appended_and_user_lines_stay() -> None:
    first = render("# mine\n*.bak\n", ["RESULTS.md", "codegen-out/"])
    assert first.startswith("# mine\n*.bak\n")
    second = render(first, ["other/"])
    assert second.count("crucible: spared paths") == 2  # one begin marker, one end marker
    assert "/other/" in second and "RESULTS.md" not in second and "*.bak" in second
    assert render(second, []) == "# mine\n*.bak\n"


@pytest.mark.parametrize(
    ("path", "pattern"),
    [
        ("codegen-out/", "/codegen-out/"),
        ("a/b/codegen-out", "/a/b/codegen-out"),
        ("weird[1]*?.txt", "/weird\\[1]\\*\\?.txt"),
        ("#hash", "/#hash"),
        ("trailing ", "/trailing\\ "),
    ],
)
def test_exclude_patterns_match_exactly_one_path(tmp_path: Path, path: str, pattern: str) -> None:
    assert exclude_pattern(path) == pattern
    ws = tmp_path / "ws"
    ws.mkdir()
    git(ws, "init", "-q")
    (ws / ".git/info/exclude").write_text(pattern + "\n")
    name = path.rstrip("/")
    assert (
        git(ws, "check-ignore", "-q", "--no-index", name + ("/" if path.endswith("/") else ""), check=False)
        == ""
    )
    decoy = "elsewhere/" + name
    done = git(ws, "check-ignore", "--no-index", decoy, check=False)
    assert done == ""  # anchored: the same name deeper is not spared


def _clone_source(tmp_path: Path) -> Path:
    source = make_base(tmp_path / "source")
    git(source, "tag", "v1")
    git(source, "checkout", "-q", "-b", "feature")
    write(source, "feature.txt", "on the branch\n")
    git(source, "add", "-A")
    git(source, "commit", "-q", "-m", "feature")
    git(source, "checkout", "-q", "main")
    return source


@pytest.mark.parametrize("ref", [None, "feature", "v1", "full-sha", "short-sha"])
def test_clone_from_matches_git_clone_and_checkout(tmp_path: Path, ref: str | None) -> None:
    source = _clone_source(tmp_path)
    if ref and ref.endswith("-sha"):
        ref = git(source, "rev-parse", "feature~1").strip()[: 40 if ref == "full-sha" else 9]
    oracle = tmp_path / "oracle"
    git(tmp_path, "clone", "-q", str(source), str(oracle))
    if ref:
        git(oracle, "checkout", "-q", ref)
    ours = tmp_path / "ours"
    world = GitWorld.at(ours, ())
    world.clone_from(str(source), ref)
    assert worktree(ours) == worktree(oracle)  # exec bits and symlinks included
    assert git(ours, "rev-parse", "HEAD") == git(oracle, "rev-parse", "HEAD")
    assert git(ours, "ls-files", "-s") == git(oracle, "ls-files", "-s")
    assert git(ours, "status", "--porcelain") == ""
    if ref == "feature":
        assert git(ours, "symbolic-ref", "HEAD").strip() == "refs/heads/feature"


def test_clone_from_refuses_a_non_empty_workspace_and_a_missing_source(tmp_path: Path) -> None:
    occupied = tmp_path / "occupied"
    write(occupied, "file.txt", "x\n")
    with pytest.raises(WorkspaceError, match="not empty"):
        GitWorld.at(occupied, ()).clone_from(str(make_base(tmp_path / "src")), None)
    with pytest.raises(RunFailed, match="could not clone") as caught:
        GitWorld.at(tmp_path / "empty", ()).clone_from(str(tmp_path / "missing"), None)
    assert caught.value.hint
    with pytest.raises(RunFailed, match="does not name a commit"):
        GitWorld.at(tmp_path / "badref", ()).clone_from(str(tmp_path / "src"), "no-such-ref")


def _plugin_manager() -> pluggy.PluginManager:
    import crucible_core.hookspecs
    import crucible_world_git

    pm = pluggy.PluginManager(PROJECT)
    pm.add_hookspecs(crucible_core.hookspecs)
    pm.register(crucible_world_git)
    return pm


def test_the_plugin_registers_both_worlds(tmp_path: Path) -> None:
    from crucible_core.protocols import WorldContext
    from crucible_core.shell import Shell
    from crucible_world_git.commandworld import CommandWorld
    from crucible_world_git.settings import CommandWorldSettings

    registered: dict[str, object] = {}
    settings_of: dict[str, object] = {}

    def register(name: str, value: object, *, settings: type | None = None) -> None:
        registered[name] = value
        if settings is not None:
            settings_of[name] = settings

    _plugin_manager().hook.crucible_register_worlds(register=register)
    assert set(registered) == {"git", "command"}
    assert settings_of == {"command": "crucible_world_git.settings:CommandWorldSettings"}
    module, _, name = str(settings_of["command"]).partition(":")
    assert getattr(importlib.import_module(module), name) is CommandWorldSettings
    ctx = WorldContext(
        tmp_path,
        WorldSection(),
        (),
        Shell(tmp_path, dict(os.environ)),
        settings=CommandWorldSettings(apply_cmd="true"),
    )
    assert isinstance(registered["git"](ctx), GitWorld)
    assert isinstance(registered["command"](ctx), CommandWorld)


def test_loading_and_registering_the_plugin_does_not_import_dulwich() -> None:
    import subprocess
    import sys

    code = (
        "import sys, crucible_world_git\n"
        "crucible_world_git.crucible_register_worlds(register=lambda name, value, **kw: None)\n"
        "print('dulwich' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ))
    assert done.stdout.strip() == "False", done.stderr


def test_a_linked_worktree_keeps_its_own_head_and_index(tmp_path: Path) -> None:
    from crucible_core.protocols import World

    main = make_base(tmp_path / "main")
    linked = tmp_path / "linked"
    git(main, "worktree", "add", "-q", "-b", "wide-1", str(linked))
    world = GitWorld.at(linked, ("RESULTS.md",))
    assert isinstance(world, World)
    base = world.prepare()
    write(linked, "README.md", "candidate\n")
    write(linked, "RESULTS.md", "spared\n")
    sha = world.snapshot("candidate")
    assert git(main, "rev-parse", "wide-1").strip() == sha  # the worktree's branch moved
    assert git(main, "rev-parse", "main").strip() == base  # the main checkout's did not
    assert git(linked, "status", "--porcelain") == ""
    assert git(main, "status", "--porcelain") == ""
    write(linked, "README.md", "discarded\n")
    world.restore(sha)
    assert (linked / "README.md").read_text() == "candidate\n"
    assert (linked / "RESULTS.md").read_text() == "spared\n"
    assert world.apply().ok


def test_recover_clears_locks_a_killed_snapshot_left(tmp_path: Path) -> None:
    """A SIGKILL mid-snapshot leaves index.lock; a resumed run's recover() removes it."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "a.txt").write_text("a\n")
    world = GitWorld.at(workspace)
    world.prepare()
    (workspace / ".git" / "index.lock").write_bytes(b"")
    (workspace / "a.txt").write_text("b\n")
    fresh = GitWorld.at(workspace)
    with pytest.raises(RunFailed, match=r"index\.lock"):
        fresh.snapshot("blocked")
    fresh.recover()
    sha = fresh.snapshot("after recover")
    assert not (workspace / ".git" / "index.lock").exists()
    assert git(workspace, "show", f"{sha}:a.txt") == "b\n"
