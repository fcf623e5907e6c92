"""Hostile git configuration: nothing the agent writes for git to read runs, redirects or converts anything in the engine.

The agent can write the workspace's `.git/config` (filter drivers, hooks, an fsmonitor, an ssh
command, includes, core.worktree, an attributes or excludes file elsewhere), `.gitattributes`,
`.git/hooks`, and on a plain host the engine user's own `~/.gitconfig`. Each kind is planted
here with a command that would leave a mark (and the environment it saw) outside the
workspace, and then the engine's world operations run: a keep, a rollback, a wide round's fork,
capture and adoption, and a publish. No mark may appear, no file outside may change, and what
is kept is the bytes on disk. The world is driven in-process for the matrix of kinds; a real
`crucible run` shows the engine's secret, a planted FIFO, a hard-linked reflog and the
configuration put back after the run.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from crucible_core.protocols import PublishRequest
from crucible_publish_github.github import GitHubPublisher
from crucible_world_git.gitworld import GitWorld
from tests.cli_support import crucible_env, run_crucible
from tests.e2e.session import rows
from tests.hostile.test_hostile_world import hostile_domain, notes, run_and_check, tree_outside_workspace
from tests.publish_github.test_publish_github import FakeForge

SECRET = "svc_token_0123456789abcdefSECRET"
# Leaves the environment it ran with as a mark named by its first argument, then acts as `cat`.
EVIL = """#!/bin/sh
env > "{marks}/$1"
cat
"""
HOOKS = (
    "pre-commit",
    "commit-msg",
    "post-commit",
    "post-checkout",
    "post-merge",
    "post-rewrite",
    "post-index-change",
    "reference-transaction",
    "pre-auto-gc",
    "pre-push",
    "fsmonitor-watchman",
)


class Plot:
    """One hostile setup: the workspace, where marks land, and a directory outside that must not change."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.workspace = root / "ws"
        self.marks = root / "marks"
        self.outside = root / "outside"
        for directory in (self.workspace, self.marks, self.outside):
            directory.mkdir()
        (self.outside / "precious.txt").write_text("the user's file\n")
        self.evil = root / "evil.sh"
        self.evil.write_text(EVIL.format(marks=self.marks))
        self.evil.chmod(0o755)

    def command(self, mark: str) -> str:
        return f"{self.evil} {mark}"

    def config(self, where: Path, *pairs: tuple[str, str]) -> None:
        """`git config key value` in the repository at `where`, as the agent would run it."""
        for key, value in pairs:
            subprocess.run(["git", "config", key, value], cwd=where, check=True, env=_clean_env())

    def hooks(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        for name in HOOKS:
            hook = directory / name
            hook.write_text(f"#!/bin/sh\nexec {self.command('hook-' + name)}\n")
            hook.chmod(0o755)

    def left_marks(self) -> list[str]:
        return sorted(os.listdir(self.marks))

    def outside_state(self) -> dict[str, tuple[int, str]]:
        return tree_outside_workspace(self.outside)


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}


def _blob(repo: Path, rev: str) -> bytes:
    """What `rev` (commit:path) holds, as bytes (the tests' own git, never the engine's)."""
    done = subprocess.run(["git", "cat-file", "blob", rev], cwd=repo, capture_output=True, env=_clean_env())
    assert done.returncode == 0, done.stderr
    return done.stdout


def _filters(plot: Plot, where: Path) -> None:
    plot.config(
        where,
        ("filter.x.clean", plot.command("clean")),
        ("filter.x.smudge", plot.command("smudge")),
        ("filter.x.required", "true"),
        ("filter.p.process", plot.command("process")),
        ("filter.p.required", "true"),
    )


def _attributes(tree: Path) -> None:
    (tree / ".gitattributes").write_text("*.txt filter=x\n*.dat filter=p\n* text eol=crlf ident\n")


def plant_filters(plot: Plot, where: Path) -> None:
    _filters(plot, where)
    _attributes(where)


def plant_hooks(plot: Plot, where: Path) -> None:
    if (where / ".git").is_dir():  # (a linked worktree's hooks are its main repository's)
        plot.hooks(where / ".git" / "hooks")
    plot.hooks(plot.root / "hookdir")
    plot.config(where, ("core.hooksPath", str(plot.root / "hookdir")))


def plant_commands(plot: Plot, where: Path) -> None:
    plot.config(
        where,
        ("core.fsmonitor", plot.command("fsmonitor")),
        ("core.sshCommand", plot.command("ssh")),
        ("core.askPass", plot.command("askpass")),
        ("core.pager", plot.command("pager")),
        ("core.editor", plot.command("editor")),
        ("diff.external", plot.command("diff")),
        ("credential.helper", "!" + plot.command("credential")),
        ("gpg.program", plot.command("gpg")),
        ("commit.gpgSign", "true"),
        ("core.untrackedCache", "true"),
    )


def plant_includes(plot: Plot, where: Path) -> None:
    included = plot.root / "included.cfg"
    included.write_text(
        f'[filter "x"]\n\tclean = {plot.command("included-clean")}\n'
        f"\tsmudge = {plot.command('included-smudge')}\n[core]\n\tfsmonitor = {plot.command('included-fsmonitor')}\n"
    )
    plot.config(where, ("include.path", str(included)), ("includeIf.gitdir:/.path", str(included)))
    (where / ".gitattributes").write_text("* filter=x\n")


def plant_redirections(plot: Plot, where: Path) -> None:
    attributes = plot.root / "attributes"
    attributes.write_text("* filter=x\n")
    ignore_all = plot.root / "ignore-all"
    ignore_all.write_text("*\n")
    _filters(plot, where)
    plot.config(
        where,
        ("core.worktree", str(plot.outside)),
        ("core.attributesFile", str(attributes)),
        ("core.excludesFile", str(ignore_all)),
        ("core.ignoreCase", "true"),
    )
    (where / ".gitignore").write_text("NEW.TXT\n")  # ignored only if matching ignored case


def plant_worktree_config(plot: Plot, where: Path) -> None:
    plot.config(where, ("extensions.worktreeConfig", "true"))
    subprocess.run(
        ["git", "config", "--worktree", "filter.x.clean", plot.command("worktree-clean")],
        cwd=where,
        check=True,
        env=_clean_env(),
    )
    (where / ".gitattributes").write_text("* filter=x\n")


PLANTS: dict[str, Callable[[Plot, Path], None]] = {
    "filters": plant_filters,
    "hooks": plant_hooks,
    "commands": plant_commands,
    "includes": plant_includes,
    "redirections": plant_redirections,
    "worktree-config": plant_worktree_config,
}


@pytest.fixture
def plot(tmp_path: Path) -> Plot:
    return Plot(tmp_path)


def _world(plot: Plot, seen: list[str] | None = None) -> GitWorld:
    """A world as a run builds it; without `seen` it keeps no record, so it never puts the
    configuration back: what is tested is that the engine does not read it."""
    ws = plot.workspace
    (ws / "value.txt").write_text("1\n")
    (ws / "data.dat").write_bytes(b"binary\r\n\x00data\n")
    record = plot.root / "private" / "kept-record" if seen is not None else None
    world = GitWorld.at(ws, record=record, note=None if seen is None else seen.append)
    world.prepare()
    return world


def _cycle(plot: Plot, world: GitWorld, base: str) -> None:
    """A keep and two rollbacks over files the planted configuration would convert or filter."""
    ws = plot.workspace
    (ws / "value.txt").write_bytes(b"2\r\n$Id$\n")
    (ws / "new.txt").write_bytes(b"new\n")
    (ws / "NEW.txt").write_bytes(b"case\n")
    staged = world.stage()
    assert staged.refused == "" and not staged.unchanged
    kept = world.snapshot("candidate")
    for name, data in (("value.txt", b"2\r\n$Id$\n"), ("new.txt", b"new\n"), ("NEW.txt", b"case\n")):
        assert _blob(ws, f"{kept}:{name}") == data  # byte for byte, nothing ignored
    world.restore(base)
    assert (ws / "value.txt").read_bytes() == b"1\n" and not (ws / "new.txt").exists()
    world.restore(kept)
    assert (ws / "value.txt").read_bytes() == b"2\r\n$Id$\n"
    assert (ws / "data.dat").read_bytes() == b"binary\r\n\x00data\n"


@pytest.mark.parametrize("kind", sorted(PLANTS))
def test_planted_configuration_never_runs_or_redirects_in_the_world(plot: Plot, kind: str) -> None:
    world = _world(plot)
    base = world.snapshot("base")
    outside = plot.outside_state()
    PLANTS[kind](plot, plot.workspace)
    _cycle(plot, world, base)
    assert plot.left_marks() == []
    assert plot.outside_state() == outside


def test_the_engine_users_own_git_configuration_is_not_the_runs(
    plot: Plot, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = plot.root / "home"
    (home / ".config" / "git").mkdir(parents=True)
    ignore_all = plot.outside / "ignore-all"
    ignore_all.write_text("*\n")
    user_config = (
        f'[filter "x"]\n\tclean = {plot.command("home-clean")}\n\tsmudge = {plot.command("home-smudge")}\n'
        f"[core]\n\texcludesFile = {ignore_all}\n\tattributesFile = {plot.outside / 'attributes'}\n"
        "\tautocrlf = true\n\tignoreCase = true\n"
    )
    (plot.outside / "attributes").write_text("* filter=x text\n")
    (home / ".gitconfig").write_text(user_config)
    (home / ".config" / "git" / "config").write_text(user_config)
    (home / ".config" / "git" / "ignore").write_text("*\n")
    (home / ".config" / "git" / "attributes").write_text("* filter=x\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(home / ".gitconfig"))
    monkeypatch.setenv("GIT_CONFIG_COUNT", "2")
    monkeypatch.setenv("GIT_CONFIG_KEY_0", "filter.x.clean")
    monkeypatch.setenv("GIT_CONFIG_VALUE_0", plot.command("env-clean"))
    monkeypatch.setenv("GIT_CONFIG_KEY_1", "core.excludesFile")
    monkeypatch.setenv("GIT_CONFIG_VALUE_1", str(ignore_all))
    monkeypatch.setenv("GIT_DIR", str(plot.outside))
    monkeypatch.setenv("GIT_WORK_TREE", str(plot.outside))
    monkeypatch.setenv("GIT_INDEX_FILE", str(plot.outside / "index"))
    outside = plot.outside_state()
    world = _world(plot)
    base = world.snapshot("base")
    _cycle(plot, world, base)
    fork = plot.root / "forks" / "one"
    world.fork(fork, base)
    (fork / "value.txt").write_bytes(b"9\r\n")
    patch = plot.root / "one.patch"
    assert world.capture(fork, base, patch)
    world.remove_fork(fork)
    world.restore(base)
    assert world.adopt(patch).ok
    assert (plot.workspace / "value.txt").read_bytes() == b"9\r\n"
    assert plot.left_marks() == []
    assert plot.outside_state() == outside


@pytest.mark.parametrize("kind", sorted(PLANTS))
def test_planted_configuration_never_runs_in_a_wide_rounds_forks(plot: Plot, kind: str) -> None:
    """The agent plants in its fork (its own repository there) and in the workspace's: the
    engine's fill, capture and adoption read neither."""
    world = _world(plot)
    base = world.snapshot("base")
    outside = plot.outside_state()
    PLANTS[kind](plot, plot.workspace)  # as an earlier turn, or a candidate reaching the workspace, would
    world.restore(base)  # the planted files go; .git/config and .git/hooks stay as planted
    fork = plot.root / "forks" / "one"
    world.fork(fork, base)
    PLANTS[kind](plot, fork)
    (fork / "value.txt").write_bytes(b"2\r\n$Id$\n")
    (fork / "new.txt").write_bytes(b"new\n")
    patch = plot.root / "one.patch"
    assert world.capture(fork, base, patch)
    world.remove_fork(fork)
    assert world.adopt(patch).ok
    ws = plot.workspace
    assert (ws / "value.txt").read_bytes() == b"2\r\n$Id$\n" and (ws / "new.txt").read_bytes() == b"new\n"
    # a second fork, made after the workspace's configuration was planted, checks out plain bytes
    world.restore(base)
    kept = world.snapshot("base again")
    world.fork(fork, kept)
    assert (fork / "data.dat").read_bytes() == b"binary\r\n\x00data\n"
    world.remove_fork(fork)
    assert plot.left_marks() == []
    assert plot.outside_state() == outside


def test_looking_at_the_source_repository_runs_nothing_of_its_config(plot: Plot) -> None:
    """[repo].path is often the user's project around the workspace, which a local agent can
    reach: the engine's look at its uncommitted files runs none of its filters."""
    source = plot.root / "source"
    source.mkdir()
    subprocess.run(["git", "init", "-q", str(source)], check=True, env=_clean_env())
    (source / "value.txt").write_text("1\n")
    subprocess.run(["git", "add", "-A"], cwd=source, check=True, env=_clean_env())
    subprocess.run(
        ["git", "-c", "user.name=u", "-c", "user.email=u@x", "commit", "-qm", "s"],
        cwd=source,
        check=True,
        env=_clean_env(),
    )
    plant_filters(plot, source)
    plant_includes(plot, source)
    (source / "value.txt").write_text("2\n")
    changes = GitWorld.at(plot.workspace).source_changes(str(source))
    assert changes is not None and "value.txt" in changes.paths
    assert plot.left_marks() == []


def test_a_redirected_common_directory_is_rebuilt_not_written(plot: Plot) -> None:
    seen: list[str] = []
    world = _world(plot, seen)
    base = world.snapshot("base")
    elsewhere = plot.outside / "repo"
    subprocess.run(["git", "clone", "-q", str(plot.workspace), str(elsewhere)], check=True, env=_clean_env())
    outside = plot.outside_state()
    (plot.workspace / ".git" / "commondir").write_text(f"{elsewhere / '.git'}\n")
    world.memory.close()  # as a resumed engine opens it afresh
    (plot.workspace / "value.txt").write_text("2\n")
    staged = world.stage()
    assert "commondir" in staged.refused
    assert any("rebuilt it" in n for n in seen)
    world.restore(base)
    (plot.workspace / "value.txt").write_text("3\n")
    kept = world.snapshot("kept")
    assert _blob(plot.workspace, f"{kept}:value.txt") == b"3\n"
    assert plot.outside_state() == outside


def test_the_publisher_pushes_where_the_engine_says_whatever_the_config_says(plot: Plot) -> None:
    forge_git = plot.root / "forge-git"
    real = forge_git / "team" / "counter.git"
    decoy = plot.root / "decoy.git"
    for bare in (real, decoy):
        bare.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "init", "--quiet", "--bare", str(bare)], check=True, env=_clean_env())
    world = _world(plot)
    sha = world.snapshot("base")
    # the workspace's config and the engine user's both send the push (and its token) elsewhere
    redirect = (f"url.{decoy.as_uri()}.insteadOf", real.as_uri())
    plot.config(plot.workspace, redirect, ("credential.helper", "!" + plot.command("credential")))
    plot.config(
        plot.workspace, ("core.sshCommand", plot.command("ssh")), ("http.proxy", "http://127.0.0.1:9")
    )
    plant_hooks(plot, plot.workspace)
    home = plot.root / "home"
    home.mkdir()
    (home / ".gitconfig").write_text(f'[url "{decoy.as_uri()}"]\n\tinsteadOf = {real.as_uri()}\n')
    forge = FakeForge()
    try:
        env = {
            "PATH": os.environ["PATH"],
            "HOME": str(home),
            "GITHUB_TOKEN": "ghp_publishTestToken0123456789abcdef",
            "CRUCIBLE_GITHUB_API": forge.url,
            "CRUCIBLE_GITHUB_GIT": forge_git.as_uri(),
        }
        request = PublishRequest(
            repo="team/counter",
            base="main",
            branch="crucible/run/iter-1",
            sha=sha,
            workspace=plot.workspace,
            title="t",
            body="b",
            env=env,
            timeout=60,
        )
        url = GitHubPublisher().publish(request)
    finally:
        forge.close()
    assert url.endswith("/pull/1")
    pushed = subprocess.run(
        ["git", "rev-parse", "refs/heads/crucible/run/iter-1"], cwd=real, capture_output=True, text=True
    )
    assert pushed.stdout.strip() == sha
    assert subprocess.run(["git", "show-ref"], cwd=decoy, capture_output=True, text=True).stdout == ""
    assert plot.left_marks() == []


# -- through a real run ------------------------------------------------------------------------

PLANT_IN_A_TURN = (
    'git config filter.x.clean "sh -c \\"env > {marks}/clean; cat\\""'
    ' && git config filter.x.smudge "sh -c \\"env > {marks}/smudge; cat\\""'
    ' && git config core.fsmonitor "sh -c \\"env > {marks}/fsmonitor\\""'
    " && printf '* filter=x\\n' > .gitattributes"
)


def test_an_agents_filter_never_sees_the_engines_secret_and_its_config_is_put_back(
    example, tmp_path: Path
) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    manifest = hostile_domain(example, {1: PLANT_IN_A_TURN.format(marks=marks)})
    env = crucible_env(SERVICE_TOKEN=SECRET)
    root = manifest.parent
    before = tree_outside_workspace(root)
    done = run_crucible("--manifest", manifest, "--iterations", "3", env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert sorted(os.listdir(marks)) == []  # no filter or fsmonitor ran, in the engine or for the measure
    assert tree_outside_workspace(root) == before
    workspace = root / "workspace"
    assert [r["decision"] for r in rows(manifest)] == ["baseline", "keep", "keep", "keep"]
    # the configuration the agent changed is the one recorded at setup again, and a note says so
    recorded = (root / "state" / "private" / "world" / "kept-record" / "config").read_bytes()
    assert (workspace / ".git" / "config").read_bytes() == recorded
    assert b"filter" not in recorded and b"fsmonitor" not in recorded
    assert any("put back the one recorded at setup" in n for n in notes(manifest))
    assert SECRET not in (root / "state" / "session.jsonl").read_text()


@pytest.mark.parametrize(
    "attack",
    [
        "rm -f .gitattributes && mkfifo .gitattributes",
        "rm -f .git/config && mkfifo .git/config",
        "mkdir -p sub && mkfifo sub/.gitattributes",
    ],
    ids=["gitattributes", "git-config", "nested-gitattributes"],
)
def test_a_fifo_where_git_configuration_belongs_never_blocks_the_engine(example, attack: str) -> None:
    manifest = hostile_domain(example, {1: attack})
    run_and_check(manifest, 3)  # within run_crucible's deadline, or the test fails
    assert [r["decision"] for r in rows(manifest)] == ["baseline", "keep", "keep", "keep"]
    config = manifest.parent / "workspace" / ".git" / "config"
    assert config.is_file() and not config.is_symlink()


@pytest.mark.parametrize(
    "attack",
    [
        "rm -f .git/logs/HEAD && ln ../outside/precious.txt .git/logs/HEAD",
        'b=$(sed -n "s/^ref: //p" .git/HEAD) && rm -f ".git/logs/$b" && ln ../outside/precious.txt ".git/logs/$b"',
        "rm -f .git/logs/HEAD && mkfifo .git/logs/HEAD",
        'rm -rf .git/logs/refs/heads && ln -s "$PWD/../outside" .git/logs/refs/heads',
    ],
    ids=["head-log-hardlink", "branch-log-hardlink", "head-log-fifo", "log-dir-symlink"],
)
def test_reflog_lines_never_land_outside_the_workspace(example, attack: str) -> None:
    manifest = hostile_domain(example, {1: attack, 2: attack})
    run_and_check(manifest, 3)  # nothing outside the workspace changed
    root = manifest.parent
    assert (root / "outside" / "precious.txt").read_text() == "the user's file\n"
    assert sorted(os.listdir(root / "outside")) == ["precious.txt"]
    head_log = root / "workspace" / ".git" / "logs" / "HEAD"
    assert os.lstat(head_log).st_nlink == 1 and "commit:" in head_log.read_text()
