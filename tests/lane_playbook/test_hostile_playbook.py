"""Hostile playbook tasks against the run's git memory and its resume.

A task owns the workspace, `.git` included: it can `git config` anything, plant hooks,
attributes and a `commondir`, or replace `.git` with a file pointing elsewhere. The engine's
git must honour none of it: nothing a task planted runs, nothing outside the workspace is
committed or deleted, and a SIGKILL followed by `--resume` ends where an uninterrupted run does.
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from crucible_core.session_log import read_events
from tests.cli_support import CRUCIBLE, crucible_env, run_crucible
from tests.core.test_process import processes_with, wait_until_gone
from tests.hostile.test_hostile_world import tree_outside_workspace

# A task body: on the first process only, the task named by $KILL_AT arms and waits to be killed.
ARM = 'if [ "$KILL_AT" = "{name}" ] && [ ! -f "$CTL/armed" ]; then touch "$CTL/armed"; sleep 60; fi; '


def pack_with(tmp_path: Path, source: str) -> Path:
    """A playbook manifest beside the user's files: a precious file and another git repository."""
    pack = tmp_path / "pack"
    pack.mkdir(parents=True)
    (pack / "crucible.toml").write_text('[workflow]\ntype = "playbook"\n\n[agent]\ngoal = "test"\n')
    (pack / "workflow.star").write_text(textwrap.dedent(source))
    (pack / "outside").mkdir()
    (pack / "outside" / "precious.txt").write_text("the user's file\n")
    other = pack / "other"
    other.mkdir()
    (other / "theirs.txt").write_text("another project\n")
    for argv in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "theirs"]):
        subprocess.run(["git", *argv], cwd=other, env=safe_git_env(other), check=True)
    for name in ("marks", "ctl", "evil"):
        (tmp_path / name).mkdir()
    # What a planted filter, hook or fsmonitor would run: it leaves a mark (and passes data on).
    (tmp_path / "evil" / "run.sh").write_text(f"#!/bin/sh\ntouch {tmp_path}/marks/ran\ncat\n")
    (tmp_path / "evil" / "run.sh").chmod(0o755)
    return pack


def safe_git_env(workspace: Path) -> dict[str, str]:
    """How the test itself reads a repository: named explicitly, no config but its own."""
    return {
        "PATH": os.environ["PATH"],
        "GIT_DIR": str(workspace / ".git"),
        "GIT_WORK_TREE": str(workspace),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "HOME": "/nonexistent",
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }


def memory(workspace: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "core.hooksPath=/dev/null", *args],
        cwd=workspace,
        env=safe_git_env(workspace),
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, (args, done.stderr)
    return done.stdout


def env_for(tmp_path: Path, kill_at: str = "", **extra: str) -> dict[str, str]:
    return crucible_env(
        PACK=str(tmp_path / "pack"),
        MARKS=str(tmp_path / "marks"),
        CTL=str(tmp_path / "ctl"),
        EVIL=str(tmp_path / "evil"),
        KILL_AT=kill_at,
        **extra,
    )


def argv(pack: Path) -> list[str]:
    manifest = str(pack / "crucible.toml")
    return [str(CRUCIBLE), "run", "--manifest", manifest, "--max-cost", "1", "--max-time", "5m"]


def killed_then_resumed(pack: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run until the task named by KILL_AT arms, SIGKILL the whole engine, then --resume."""
    armed = Path(env["CTL"]) / "armed"
    said = pack.parent / "first-run.out"  # what the first process said, should it end unkilled
    with open(said, "wb") as out:
        proc = subprocess.Popen(
            argv(pack), cwd=pack, env=env, start_new_session=True, stdout=out, stderr=subprocess.STDOUT
        )
    try:
        for _ in range(600):
            if armed.exists() or proc.poll() is not None:
                break
            time.sleep(0.05)
        assert armed.exists(), f"the task meant to be killed never started:\n{said.read_text()[-4000:]}"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    # The resume in-process, as the suite drives the CLI. (It once ran as a real process because
    # a declared file was intermittently not captured: two isolated tasks publishing at once,
    # fixed in plan/files.py, tests/plan/test_plan_file_store.py.)
    return run_crucible(*argv(pack)[1:], "--resume", cwd=pack, env=env)


def task_results(pack: Path) -> dict[str, str]:
    return {
        e["task"]: e["status"]
        for e in read_events(pack / "state" / "session.jsonl")
        if e["kind"] == "task_result"
    }


def test_a_task_pointing_core_worktree_at_the_manifest_dir_loses_nothing_on_resume(tmp_path: Path) -> None:
    pack = pack_with(
        tmp_path,
        f"""\
        plant = command(name = "plant", run = 'git config core.worktree "$PACK" && echo planted > planted.txt', emits_files = ["planted.txt"])
        hold = command(name = "hold", run = '{ARM.format(name="hold")}echo held > held.txt', depends_on = [plant])
        workflow(type = "playbook", tasks = [plant, hold])
        """,
    )
    before = tree_outside_workspace(pack)
    resumed = killed_then_resumed(pack, env_for(tmp_path, "hold"))
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert tree_outside_workspace(pack) == before  # crucible.toml and the user's files are all there
    workspace = pack / "workspace"
    tracked = set(memory(workspace, "ls-files").split())
    assert tracked == {"planted.txt", "held.txt"}  # the manifest dir was never committed
    assert (workspace / "planted.txt").read_text() == "planted\n"


# What a task plants in the workspace's repository (or, for "global config", what is planted in
# the engine's own environment) so that the engine's next git call would run $EVIL/run.sh.
PLANTS = {
    "clean and smudge filters": 'git config filter.evil.clean "$EVIL/run.sh"; '
    'git config filter.evil.smudge "$EVIL/run.sh"; git config filter.evil.required true; '
    'echo "* filter=evil" > .gitattributes',
    "a filter named in info/attributes": 'git config filter.evil.clean "$EVIL/run.sh"; '
    'mkdir -p .git/info; echo "* filter=evil" > .git/info/attributes',
    "hooks": "mkdir -p .git/hooks; for h in pre-commit prepare-commit-msg commit-msg post-commit "
    "post-checkout post-index-change reference-transaction post-rewrite; "
    'do cp "$EVIL/run.sh" .git/hooks/$h; done',
    "core.hooksPath": 'mkdir -p "$EVIL/hooks"; for h in pre-commit commit-msg post-commit reference-transaction; '
    'do cp "$EVIL/run.sh" "$EVIL/hooks/$h"; done; git config core.hooksPath "$EVIL/hooks"',
    "core.fsmonitor": 'git config core.fsmonitor "$EVIL/run.sh"',
    "include.path": 'git config -f "$EVIL/inc.cfg" core.fsmonitor "$EVIL/run.sh"; '
    'git config -f "$EVIL/inc.cfg" core.worktree "$PACK"; '
    'git config -f "$EVIL/inc.cfg" filter.evil.clean "$EVIL/run.sh"; '
    'git config include.path "$EVIL/inc.cfg"; echo "* filter=evil" > .gitattributes',
    "commondir": 'echo "$PACK/other/.git" > .git/commondir',
    "global config": "true",  # planted in the engine's environment by the test, not by the task
}


@pytest.mark.parametrize("kind", sorted(PLANTS))
def test_nothing_a_task_plants_in_git_runs_or_redirects_the_engine(tmp_path: Path, kind: str) -> None:
    pack = pack_with(
        tmp_path,
        f"""\
        plant = command(name = "plant", run = '{PLANTS[kind]}; echo planted > planted.txt', emits_files = ["planted.txt"])
        edit = command(name = "edit", run = "echo edited > edited.txt", emits_files = ["edited.txt"], depends_on = [plant])
        spoil = command(name = "spoil", run = "echo spoiled > spoiled.txt; exit 1", depends_on = [edit], required = False)
        hold = command(name = "hold", run = '{ARM.format(name="hold")}echo held > held.txt', depends_on = [edit])
        workflow(type = "playbook", tasks = [plant, edit, spoil, hold])
        """,
    )
    extra: dict[str, str] = {}
    if kind == "global config":
        evil, home = tmp_path / "evil", tmp_path / "home"
        (home / "git").mkdir(parents=True)
        config = f'[core]\n\thooksPath = {evil}\n\tfsmonitor = {evil}/run.sh\n[filter "evil"]\n\tclean = {evil}/run.sh\n'
        for path in (home / ".gitconfig", home / "git" / "config"):
            path.write_text(config)
        (home / "git" / "attributes").write_text("* filter=evil\n")
        for hook in ("pre-commit", "post-commit"):
            (evil / hook).write_bytes((evil / "run.sh").read_bytes())
            (evil / hook).chmod(0o755)
        extra = {
            "HOME": str(home),
            "XDG_CONFIG_HOME": str(home),
            "GIT_CONFIG_GLOBAL": str(home / ".gitconfig"),
        }
    before = tree_outside_workspace(pack)
    resumed = killed_then_resumed(pack, env_for(tmp_path, "hold", **extra))
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "Traceback" not in resumed.stderr
    assert not (tmp_path / "marks" / "ran").exists(), f"something {kind} planted ran in the engine's git"
    assert tree_outside_workspace(pack) == before  # the other repository got no commit either
    assert task_results(pack) == {"plant": "pass", "edit": "pass", "spoil": "fail", "hold": "pass"}
    workspace = pack / "workspace"
    tracked = set(memory(workspace, "ls-files").split()) - {".gitattributes"}
    assert tracked == {"planted.txt", "edited.txt", "held.txt"}
    assert not (workspace / "spoiled.txt").exists()  # the failing task's change was discarded
    log = memory(workspace, "log", "--format=%s").split("\n")
    assert log[:4] == [
        "crucible: task hold",
        "crucible: task edit",
        "crucible: task plant",
        "crucible: playbook base",
    ]


def test_a_task_that_replaces_dot_git_with_a_link_elsewhere_is_refused_then_rebuilt(tmp_path: Path) -> None:
    pack = pack_with(
        tmp_path,
        """\
        plant = command(name = "plant", run = 'mv .git "$EVIL/stolen" && echo "gitdir: $PACK/other/.git" > .git && echo x > x.txt')
        after = command(name = "after", run = "echo after > after.txt", depends_on = [plant])
        workflow(type = "playbook", tasks = [plant, after])
        """,
    )
    before = tree_outside_workspace(pack)
    env = env_for(tmp_path)
    refused = run_crucible(*argv(pack)[1:], cwd=pack, env=env)
    assert refused.returncode == 11, refused.stdout + refused.stderr  # a workspace error, no traceback
    assert "Traceback" not in refused.stderr and "no longer the playbook's repository" in refused.stderr
    assert tree_outside_workspace(pack) == before  # nothing was committed into the other repository
    resumed = run_crucible(*argv(pack)[1:], "--resume", cwd=pack, env=env)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert tree_outside_workspace(pack) == before
    workspace = pack / "workspace"
    assert (workspace / ".git").is_dir() and set(memory(workspace, "ls-files").split()) == {"after.txt"}


# Shared and isolated tasks handing declared files on; each can be the one killed.
PIPELINE = {
    "a": ("mkdir -p out && echo A > out/a.txt", 'emits_files = ["out/a.txt"]'),
    "iso": (
        "mkdir -p out && echo I > out/iso.txt && echo scratch > scratch.txt",
        'isolated = True, emits_files = ["out/iso.txt"], depends_on = [a]',
    ),
    "side": ("echo S > side.txt", 'isolated = True, emits_files = ["side.txt"], depends_on = [a]'),
    "b": (
        'mkdir -p out && cat "$CRUCIBLE_INPUT_FILES/iso/out/iso.txt" > out/b.txt',
        'emits_files = ["out/b.txt"], depends_on = [iso]',
    ),
    "c": ("echo C > c.txt", 'emits_files = ["c.txt"], depends_on = [b, side]'),
}


def pipeline(tmp_path: Path) -> Path:
    lines = [
        f"{name} = command(name = \"{name}\", run = '{ARM.format(name=name)}{body}', {extra})"
        for name, (body, extra) in PIPELINE.items()
    ]
    tasks = ", ".join(PIPELINE)
    return pack_with(tmp_path, "\n".join(lines) + f'\nworkflow(type = "playbook", tasks = [{tasks}])\n')


def outcome(pack: Path) -> tuple[dict[str, str], list[str]]:
    """The workspace's files (not .git) with their content hashes, and its commits as (subject, tree)."""
    workspace = pack / "workspace"
    files = {}
    for current, dirnames, filenames in os.walk(workspace):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for name in filenames:
            path = Path(current) / name
            files[str(path.relative_to(workspace))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return files, memory(workspace, "log", "--format=%s %T").splitlines()


def test_a_resumed_playbook_ends_as_an_uninterrupted_one_wherever_it_was_killed(tmp_path: Path) -> None:
    whole = pipeline(tmp_path / "whole")
    done = run_crucible(*argv(whole)[1:], cwd=whole, env=env_for(tmp_path / "whole"))
    assert done.returncode == 0, done.stdout + done.stderr
    expected = outcome(whole)
    assert set(expected[0]) == {"out/a.txt", "out/b.txt", "c.txt"}  # isolated edits stay out
    assert [line.split()[-2] for line in expected[1]] == ["c", "b", "a", "base"]
    for kill_at in ("iso", "side", "b", "c"):
        pack = pipeline(tmp_path / kill_at)
        resumed = killed_then_resumed(pack, env_for(tmp_path / kill_at, kill_at))
        assert resumed.returncode == 0, (kill_at, resumed.stdout + resumed.stderr)
        assert outcome(pack) == expected, kill_at


def test_what_a_task_leaves_running_is_killed_before_the_next_task(tmp_path: Path) -> None:
    """The promise (docs/operating.md): a descendant that keeps the task's group, or leaves it
    but keeps the task's environment mark, dies when the task ends. (One that also scrubs its
    environment, `setsid env -i`, is the documented limit of a local backend.)"""
    marker = f"crucible-test-{uuid.uuid4().hex}"
    pack = pack_with(
        tmp_path,
        f"""\
        leave = command(name = "leave", run = "sh -c 'sleep 300; :' {marker} & setsid sh -c 'sleep 300; :' {marker} & sleep 0.3")
        after = command(name = "after", run = "if ps -eo args | grep -q '[s]leep 300; : {marker}'; then exit 1; fi", depends_on = [leave])
        workflow(type = "playbook", tasks = [leave, after])
        """,
    )
    try:
        # the console script, as users start it: an engine that adopts its children's orphans
        done = run_crucible(*argv(pack)[1:], cwd=pack, env=env_for(tmp_path), real_process=True)
        assert done.returncode == 0, done.stdout + done.stderr
        assert task_results(pack) == {"leave": "pass", "after": "pass"}  # gone before "after" ran
        assert wait_until_gone(marker, seconds=5) == []
    finally:
        for pid in processes_with(marker):
            os.kill(pid, signal.SIGKILL)


def test_reflog_links_packed_refs_fifos_and_alternates_neither_leak_nor_hang(tmp_path: Path) -> None:
    """A hard link at a reflog would carry the engine's reflog line into a file elsewhere; a FIFO at
    packed-refs or a ref would block git; alternates would lend another repository's objects."""
    pack = pack_with(
        tmp_path,
        """\
        plant = command(name = "plant", run = 'mkdir -p .git/logs/refs/heads && ln -f "$EVIL/sink" .git/logs/HEAD && ln -f "$EVIL/sink" .git/logs/refs/heads/$(git symbolic-ref --short HEAD) && rm -f .git/packed-refs && mkfifo .git/packed-refs && mkfifo .git/refs/heads/trap && echo "$PACK/other/.git/objects" > .git/objects/info/alternates && echo x > x.txt')
        after = command(name = "after", run = "echo after > after.txt", depends_on = [plant])
        workflow(type = "playbook", tasks = [plant, after])
        """,
    )
    sink = tmp_path / "evil" / "sink"
    sink.write_text("outside the workspace\n")
    done = run_crucible(*argv(pack)[1:], cwd=pack, env=env_for(tmp_path), timeout=90)
    assert done.returncode == 0, done.stdout + done.stderr
    assert sink.read_text() == "outside the workspace\n"  # no reflog line went through the link
    assert task_results(pack) == {"plant": "pass", "after": "pass"}
    workspace = pack / "workspace"
    assert not (workspace / ".git" / "objects" / "info" / "alternates").exists()
    assert set(memory(workspace, "ls-files").split()) == {"x.txt", "after.txt"}
