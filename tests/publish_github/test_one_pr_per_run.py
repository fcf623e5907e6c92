"""Publish-on-keep's deliverable: one draft PR per run, opened at the first keep and moved on each
later one, off the loop's critical path, finished exactly once by a resume after a kill.

The forge is tests/fakes/github_api.py (GitHub's REST shape on 127.0.0.1, reached through the
publisher's own urllib client) and a bare git repository reached through the real git CLI; the
bare repository's `update` hook logs every ref change, so "nothing pushed twice" is what git saw.
"""

from __future__ import annotations

import os
import shutil
import signal
import stat
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from crucible_core.plugins import load_plugins
from crucible_core.run.budget import Budget
from crucible_core.session.entry import execute
from crucible_core.session.request import SessionRequest
from crucible_core.session_log import read_events
from crucible_publish_github import on_keep
from tests.cli_support import CRUCIBLE, crucible_env, run_crucible
from tests.fakes.github_api import FakeGitHub, serve_github

TOKEN = "ghp_oneprTestToken0123456789abcdef"
PLUGINS = ["core", "world_git", "judge_command", "backend_local", "broker_mcp", "publish_github"]

# The proposer alternates by iteration: odd ones raise the value (kept), even ones lower it
# (discarded), so four iterations keep iterations 1 and 3, whatever a kill interrupted.
ALTERNATING = """#!/bin/sh
set -eu
v=$(cat value.txt)
if [ $((CRUCIBLE_ITERATION % 2)) -eq 1 ]; then echo $((v + 1)) > value.txt; else echo $((v - 1)) > value.txt; fi
"""

UPDATE_HOOK = """#!/bin/sh
echo "$1 $3" >> {log}
"""


class Remote:
    def __init__(self, root: Path) -> None:
        self.root = root / "forge-git"
        self.bare = self.root / "team" / "counter.git"
        self.bare.parent.mkdir(parents=True)
        self.pushes = root / "pushes.log"
        subprocess.run(["git", "init", "--quiet", "--bare", str(self.bare)], check=True)
        hook = self.bare / "hooks" / "update"
        hook.write_text(UPDATE_HOOK.format(log=self.pushes))
        hook.chmod(hook.stat().st_mode | stat.S_IXUSR)

    def branches(self) -> dict[str, str]:
        listed = subprocess.run(
            ["git", "for-each-ref", "--format=%(refname:short) %(objectname)", "refs/heads"],
            cwd=self.bare,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        return dict(zip(listed[::2], listed[1::2], strict=True))

    def updates(self) -> list[str]:
        return self.pushes.read_text().splitlines() if self.pushes.exists() else []


@pytest.fixture
def remote(tmp_path: Path) -> Remote:
    return Remote(tmp_path)


def alternating(example: Callable[[str], Path], tmp_path: Path) -> Path:
    manifest = example("counter")
    (manifest.parent / "bump.sh").write_text(ALTERNATING)
    manifest.write_text(manifest.read_text() + '\n[publish]\npr_repo = "team/counter"\n')
    return manifest


def forge_env(monkeypatch: pytest.MonkeyPatch, forge: FakeGitHub, remote: Remote) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    monkeypatch.setenv("CRUCIBLE_GITHUB_API", forge.url)
    monkeypatch.setenv("CRUCIBLE_GITHUB_GIT", remote.root.as_uri())


def events_of(manifest: Path) -> list[dict[str, Any]]:
    return list(read_events(manifest.parent / "state" / "session.jsonl"))


def kept_shas(events: list[dict[str, Any]]) -> dict[int, str]:
    return {
        e["row"]["iter"]: e["row"]["sha"]
        for e in events
        if e["kind"] == "row" and e["row"]["decision"] == "keep" and e["row"]["iter"] > 0
    }


def test_four_iterations_two_keeps_leave_one_draft_pr_at_the_last_kept_commit(
    example: Any, tmp_path: Path, remote: Remote, monkeypatch: pytest.MonkeyPatch
) -> None:
    # git is reached through a wrapper that logs its argv: the token must never be on it
    wrapped = tmp_path / "bin"
    wrapped.mkdir()
    argv_log = tmp_path / "argv.log"
    (wrapped / "git").write_text(f'#!/bin/sh\necho "$@" >> {argv_log}\nexec {shutil.which("git")} "$@"\n')
    (wrapped / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{wrapped}:{os.environ['PATH']}")
    manifest = alternating(example, tmp_path)
    with serve_github() as forge:
        forge_env(monkeypatch, forge, remote)
        result = execute(
            load_plugins(names=PLUGINS),
            SessionRequest(manifest=manifest, budget=Budget(iterations=4), ui="headless"),
        )
    assert result.outcome == "finished", result.reason
    events = events_of(manifest)
    kept = kept_shas(events)
    assert sorted(kept) == [1, 3]
    run_id = next(e["run_id"] for e in events if e["kind"] == "start")
    base = next(e["base_commit"] for e in events if e["kind"] == "identity")
    branch = f"crucible/{run_id}"

    # one pull request, a draft from the run's branch, based on the pinned commit the agent edited against
    assert len(forge.pulls) == 1
    (pull,) = forge.pulls.values()
    assert pull["draft"] is True and pull["state"] == "open"
    assert pull["head"]["ref"] == branch and pull["base"]["ref"] == f"{branch}-base"
    assert remote.branches() == {branch: kept[3], f"{branch}-base": base}
    # opened once, then updated: the branch moved from the first keep to the second with a lease
    assert len(forge.calls("POST", "/repos/team/counter/pulls")) == 1
    assert forge.calls("PATCH", "/repos/team/counter/pulls/")
    assert f"refs/heads/{branch} {kept[1]}" in remote.updates()
    assert remote.updates().count(f"refs/heads/{branch} {kept[3]}") == 1
    # the body: the goal, the kept iterations' table, the chart of the five measured scores
    body = pull["body"]
    assert "Raise the integer in value.txt" in body
    assert "| iteration | score | vs baseline | note |" in body
    assert "| 1 | 1 | +1 | `value=1` |" in body and "| 3 | 2 | +2 | `value=2` |" in body
    assert "\n| 2 |" not in body  # a discarded iteration is not a kept row
    assert "xychart-beta" in body and "x-axis [0, 1, 2, 3, 4]" in body and "line [0, 1, 0, 2, 1]" in body
    # one admitted draft-pr write for the run, and the PR's links on the wire once
    admitted = [e for e in events if e["kind"] == "output_admitted"]
    assert [(e["output_kind"], e["tool"], e["iter"]) for e in admitted] == [("draft-pr", "publish", 1)]
    links = [e for e in events if e["kind"] == "pr_links"]
    assert [link["links"] for link in links] == [
        [{"url": pull["html_url"], "repo": "team/counter", "name": "counter", "branch": branch}]
    ]
    # the credential reached the forge's API as a header, and nowhere else
    assert all(r.auth == f"Bearer {TOKEN}" for r in forge.requests)
    assert TOKEN not in body
    assert TOKEN not in (manifest.parent / "state" / "session.jsonl").read_text()
    assert "push" in argv_log.read_text() and TOKEN not in argv_log.read_text()


class HangingForge(FakeGitHub):
    """A forge that answers nothing for `hang` seconds (or until released)."""

    hang: float = 30.0
    release: threading.Event = threading.Event()

    def answer(self, method: str, path: str, query: dict[str, list[str]], body: Any) -> tuple[int, Any]:
        self.release.wait(self.hang)
        return super().answer(method, path, query, body)


def test_a_hanging_forge_does_not_slow_the_iterations(
    example: Any, tmp_path: Path, remote: Remote, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(on_keep, "DRAIN_SECONDS", 1.0)
    manifest = alternating(example, tmp_path)
    hanging = HangingForge()
    hanging.release = threading.Event()
    with serve_github(hanging) as forge:
        forge_env(monkeypatch, forge, remote)
        started = time.monotonic()
        result = execute(
            load_plugins(names=PLUGINS),
            SessionRequest(manifest=manifest, budget=Budget(iterations=4), ui="headless"),
        )
        took = time.monotonic() - started
        hanging.release.set()
    assert result.outcome == "finished", result.reason
    events = events_of(manifest)
    assert sorted(kept_shas(events)) == [1, 3]
    # every iteration ran while the forge held its first request, and run end waited its bound only
    assert took < HangingForge.hang - 5, took
    notes = [e["msg"] for e in events if e["kind"] == "note"]
    assert any("still being published 1s after the run ended" in n for n in notes), notes
    assert not [e for e in events if e["kind"] == "pr_links"]


class OpenThenDie(FakeGitHub):
    """Opens the pull request, then holds the reply until the test has killed the engine."""

    opened: threading.Event = threading.Event()
    release: threading.Event = threading.Event()

    def answer(self, method: str, path: str, query: dict[str, list[str]], body: Any) -> tuple[int, Any]:
        answered = super().answer(method, path, query, body)
        if method == "POST" and path.endswith("/pulls") and not self.release.is_set():
            self.opened.set()
            self.release.wait(60)
        return answered


@pytest.fixture
def dying_forge() -> Iterator[OpenThenDie]:
    forge = OpenThenDie()
    forge.opened, forge.release = threading.Event(), threading.Event()
    with serve_github(forge) as served:
        yield served  # type: ignore[misc]
        forge.release.set()


def test_kill_mid_publish_then_resume_leaves_one_up_to_date_pr_and_pushes_nothing_twice(
    example: Any, tmp_path: Path, remote: Remote, dying_forge: OpenThenDie
) -> None:
    manifest = alternating(example, tmp_path)
    env = crucible_env(
        GITHUB_TOKEN=TOKEN,
        CRUCIBLE_GITHUB_API=dying_forge.url,
        CRUCIBLE_GITHUB_GIT=remote.root.as_uri(),
    )
    proc = subprocess.Popen(
        [str(CRUCIBLE), "run", "--manifest", str(manifest), "--iterations", "4"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        # the deterministic point: the PR exists on the forge, its answer has not reached the engine
        assert dying_forge.opened.wait(120), "the engine never opened its pull request"
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait()
        dying_forge.release.set()
    before = events_of(manifest)
    assert not [e for e in before if e["kind"] == "pr_links"]  # the kill came before the engine knew

    done = run_crucible("run", "--manifest", manifest, "--iterations", "4", "--resume", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    events = events_of(manifest)
    kept = kept_shas(events)
    last = max(kept)  # what the killed iteration left is the engine's resume to settle, not publish's
    run_id = next(e["run_id"] for e in events if e["kind"] == "start")
    branch = f"crucible/{run_id}"
    assert len(dying_forge.pulls) == 1  # the resume found the PR the killed engine opened
    (pull,) = dying_forge.pulls.values()
    assert len(dying_forge.calls("POST", "/repos/team/counter/pulls")) == 1
    assert remote.branches()[branch] == kept[last]  # up to date with the last kept commit
    assert f"\n| {last} | " in pull["body"]
    updates = remote.updates()
    assert len(updates) == len(set(updates)), updates  # no ref was moved to the same commit twice
    assert [e["iter"] for e in events if e["kind"] == "output_admitted"] == [1]
    assert [link["links"][0]["url"] for link in (e for e in events if e["kind"] == "pr_links")] == [
        pull["html_url"]
    ]


COMPOSITE = """\
[composite]
name = "trio"

[[component]]
domain = "domains/left"

[[component]]
domain = "domains/right"

[[component]]
domain = "domains/idle"

[workspace]
dir = "workspace"
inject = ["measure.sh"]

[agent]
backend = "command"
agent_cmd = "sh ../propose.sh"
goal = "Raise the sum of the counters."

[judge]
measure_cmd = "sh measure.sh"
direction = "higher"

[publish]
pr_repo = "team/left"

[outputs.draft-pr]
count = 3
target = { open = { scope = "team/*" } }
"""

# iteration 1 edits left, iteration 2 edits right; idle is never edited
COMPOSITE_MEASURE = """\
a=$(cat left/value.txt); b=$(cat right/value.txt); c=$(cat idle/value.txt)
printf '{"valid": true, "score": %s, "note": "sum"}\\n' $((a + b + c))
"""
COMPOSITE_PROPOSE = """\
set -eu
if [ "$CRUCIBLE_ITERATION" -eq 1 ]; then echo $(( $(cat left/value.txt) + 1 )) > left/value.txt; fi
if [ "$CRUCIBLE_ITERATION" -eq 2 ]; then echo $(( $(cat right/value.txt) + 1 )) > right/value.txt; fi
"""


def test_a_composite_opens_one_linked_draft_pr_per_edited_component(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.cli_support import EXAMPLES

    root = tmp_path / "composite"
    remotes = tmp_path / "forge-git"
    for name in ("left", "right", "idle"):
        domain = root / "domains" / name
        shutil.copytree(EXAMPLES / "counter", domain, ignore=shutil.ignore_patterns("workspace", "state"))
        manifest = domain / "crucible.toml"
        manifest.write_text(manifest.read_text() + f'\n[publish]\npr_repo = "team/{name}"\n')
        (remotes / "team").mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["git", "init", "--quiet", "--bare", str(remotes / "team" / f"{name}.git")], check=True
        )
    (root / "measure.sh").write_text(COMPOSITE_MEASURE)
    (root / "propose.sh").write_text(COMPOSITE_PROPOSE)
    manifest = root / "crucible.toml"
    manifest.write_text(COMPOSITE)
    with serve_github() as forge:
        monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
        monkeypatch.setenv("CRUCIBLE_GITHUB_API", forge.url)
        monkeypatch.setenv("CRUCIBLE_GITHUB_GIT", remotes.as_uri())
        result = execute(
            load_plugins(names=[*PLUGINS, "world_composite"]),
            SessionRequest(manifest=manifest, budget=Budget(iterations=2), ui="headless"),
        )
    assert result.outcome == "finished", result.reason
    events = events_of(manifest)
    run_id = next(e["run_id"] for e in events if e["kind"] == "start")
    # one PR per edited component, on that component's own fork; none for the untouched one
    pulls = {pull["repo"]: pull for pull in forge.pulls.values()}
    assert sorted(pulls) == ["team/left", "team/right"]
    left, right = pulls["team/left"], pulls["team/right"]
    assert left["head"]["ref"] == f"crucible/{run_id}-left" and left["draft"] is True
    assert right["head"]["ref"] == f"crucible/{run_id}-right"
    # each body links the other
    assert right["html_url"] in left["body"] and left["html_url"] in right["body"]
    assert left["html_url"] not in left["body"]
    # the branches hold each component's own kept commit (from its own repository)
    for name, pull in (("left", left), ("right", right)):
        head = subprocess.run(
            ["git", "rev-parse", f"refs/heads/{pull['head']['ref']}"],
            cwd=remotes / "team" / f"{name}.git",
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        workspace_head = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=root / "workspace" / name,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        assert head == workspace_head
    admitted = [(e["target"], e["iter"]) for e in events if e["kind"] == "output_admitted"]
    assert admitted == [("team/left", 1), ("team/right", 2)]
    links = [e["links"] for e in events if e["kind"] == "pr_links"]
    assert {(link["repo"], link["name"], link["url"]) for link in links[-1]} == {
        ("team/left", "left", left["html_url"]),
        ("team/right", "right", right["html_url"]),
    }


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()


@pytest.mark.leaves_open_log  # the hooks alone: no session writes the shutdown line
@pytest.mark.parametrize("beyond", [True, False], ids=["commits-beyond-base", "no-commits"])
def test_a_playbook_publishes_one_draft_pr_only_when_its_workspace_moved_beyond_its_base(
    example: Any, tmp_path: Path, remote: Remote, monkeypatch: pytest.MonkeyPatch, beyond: bool
) -> None:
    """The publish side of the playbook rule, through the lifecycle hooks a playbook lane fires:
    a run start with a mediation point and a publisher, then run end."""
    import json

    from crucible_broker_mcp.mediation import Mediator
    from crucible_core.broker.service import declaration_for
    from crucible_core.manifest.loader import load_manifest
    from crucible_core.run.lifecycle import RunContext, RunEnd
    from crucible_core.session_log import SessionLog
    from crucible_publish_github import crucible_run_end, crucible_run_start
    from crucible_publish_github.github import GitHubPublisher

    manifest = example("counter")
    manifest.write_text(manifest.read_text() + '\n[publish]\npr_repo = "team/counter"\n')
    plugins = load_plugins(names=PLUGINS)
    loaded = load_manifest(manifest, plugins=plugins)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    git(workspace, "init", "--quiet")
    (workspace / "value.txt").write_text("0\n")
    git(workspace, "add", "value.txt")
    git(workspace, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet", "-m", "base")
    base = git(workspace, "rev-parse", "HEAD")
    if beyond:
        (workspace / "value.txt").write_text("1\n")
        git(workspace, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet", "-am", "task")
    head = git(workspace, "rev-parse", "HEAD")
    state = tmp_path / "state"
    state.mkdir()
    log_path = state / "session.jsonl"
    log_path.write_text(
        json.dumps({"v": 1, "seq": 1, "ts": 0, "kind": "identity", "base_commit": base}) + "\n"
    )
    log = SessionLog(log_path)
    draft = declaration_for(plugins, loaded, environ={}).output("draft-pr")
    assert draft is not None
    mediator = Mediator([draft], log.emit)

    class Broker:
        admit = staticmethod(mediator.admit)

    with serve_github() as forge:
        env = {
            "GITHUB_TOKEN": TOKEN,
            "CRUCIBLE_GITHUB_API": forge.url,
            "CRUCIBLE_GITHUB_GIT": remote.root.as_uri(),
        }
        context = RunContext(
            loaded,
            workspace,
            state,
            tmp_path / "private",
            "playbookrun1",
            False,
            Broker(),  # type: ignore[arg-type]
            lane="playbook",
            note=lambda text, level: None,
            engine_env=env,
            publisher=GitHubPublisher(),
            emit=log.emit,
        )
        crucible_run_start(context)
        crucible_run_end(RunEnd(context, "complete", "", 1))
    events = list(read_events(log_path))
    if not beyond:
        assert forge.requests == [] and remote.branches() == {}
        assert not [e for e in events if e["kind"] in ("output_admitted", "pr_links")]
        return
    assert [pull["head"]["ref"] for pull in forge.pulls.values()] == ["crucible/playbookrun1"]
    assert remote.branches() == {"crucible/playbookrun1": head, "crucible/playbookrun1-base": base}
    assert [e["output_kind"] for e in events if e["kind"] == "output_admitted"] == ["draft-pr"]
    assert [e["kind"] for e in events].count("pr_links") == 1
