"""A judgeless composite playbook (C-PLAYBOOK-COMPOSITE): its graph runs over every component.

Two components, each a domain cloning its own real git repository, assembled into one
workspace; a passing task's changes become a commit in each component it touched, a failing
task's are discarded in all of them, the identity names both bases, and no score is made;
killed mid-graph, a resume puts every component back to its base plus the declared files of
the tasks that passed. Driven in-process, except the run a SIGKILL ends.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from crucible_core.run import part_tokens
from crucible_core.session_log import read_events
from tests.cli_support import CRUCIBLE, crucible_env, run_crucible

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", "-c", "commit.gpgsign=false"]

COMPOSITE = """\
[composite]
name = "pair"

[[component]]
domain = "domains/api"

[[component]]
domain = "domains/web"
name = "ui"

[workspace]
dir = "workspace"

[agent]
goal = "bump the version in both components"
backend = "command"
agent_cmd = "true"

[workflow]
type = "playbook"

[[workflow.task]]
name = "bump"
kind = "command"
command = "echo 2 > api/version.txt && echo 2 > ui/version.txt"

[[workflow.task]]
name = "wreck"
kind = "command"
command = "echo junk > api/junk.txt; rm ui/index.html; exit 1"
depends_on = ["bump"]
required = false

[[workflow.task]]
name = "verify"
kind = "command"
command = 'test "$(cat api/version.txt)" = 2 && test -f ui/index.html && ! test -e api/junk.txt'
depends_on = ["wreck"]
join = "settled"
"""


def git(repo: Path, *args: str) -> str:
    done = subprocess.run([*GIT, "-C", str(repo), *args], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def repository(root: Path, files: dict[str, str]) -> str:
    """A real repository with one commit of `files`; its HEAD."""
    root.mkdir(parents=True)
    git(root, "init", "-q")
    for name, text in files.items():
        (root / name).write_text(text)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "upstream")
    return git(root, "rev-parse", "HEAD")


def domain(root: Path, repo: Path) -> None:
    root.mkdir(parents=True)
    (root / "crucible.toml").write_text(
        f'[repo]\npath = "{repo}"\n\n[workspace]\ndir = "workspace"\n\n'
        '[agent]\ngoal = "own goal"\nbackend = "command"\nagent_cmd = "true"\n'
    )


def events(pack: Path) -> list[dict[str, Any]]:
    return list(read_events(pack / "state" / "session.jsonl"))


def test_a_judgeless_composite_playbook_runs_its_graph_over_every_component(tmp_path: Path) -> None:
    api_head = repository(tmp_path / "upstream" / "api", {"version.txt": "1\n"})
    web_head = repository(tmp_path / "upstream" / "web", {"version.txt": "1\n", "index.html": "<p>\n"})
    pack = tmp_path / "pack"
    domain(pack / "domains" / "api", tmp_path / "upstream" / "api")
    domain(pack / "domains" / "web", tmp_path / "upstream" / "web")
    (pack / "crucible.toml").write_text(COMPOSITE)

    done = run_crucible(
        "run", "--manifest", pack / "crucible.toml", "--max-cost", "1", "--max-time", "5m", "--ui", "headless"
    )

    assert done.returncode == 0, done.stdout + done.stderr
    log = events(pack)
    results = {e["task"]: e["status"] for e in log if e["kind"] == "task_result"}
    assert results == {"bump": "pass", "wreck": "fail", "verify": "pass"}
    shutdown = [e for e in log if e["kind"] == "shutdown"]
    assert len(shutdown) == 1 and shutdown[0]["outcome"] == "finished"
    # each component is its own clone, its history the upstream commit, then the passing task
    workspace = pack / "workspace"
    for name, head in (("api", api_head), ("ui", web_head)):
        assert git(workspace / name, "log", "--format=%s").splitlines() == ["crucible: task bump", "upstream"]
        assert git(workspace / name, "rev-parse", "HEAD~1") == head
        assert git(workspace / name, "status", "--porcelain") == ""
        assert (workspace / name / "version.txt").read_text() == "2\n"
    assert not (workspace / "api" / "junk.txt").exists()  # the failing task's changes: discarded
    assert (workspace / "ui" / "index.html").read_text() == "<p>\n"
    # the identity names each component's base; no combined score is made
    (identity,) = [e for e in log if e["kind"] == "identity"]
    assert part_tokens.decode(identity["base_commit"]) == {"api": api_head, "ui": web_head}
    (summary,) = [e for e in log if e["kind"] == "summary"]
    assert summary["best_score"] is None and summary["kept"] == 0
    # the component domains are reused verbatim: nothing was made in them
    assert not (pack / "domains" / "api" / "workspace").exists()


RESUMED = """\
[[workflow.task]]
name = "bump"
kind = "command"
command = "echo x >> $MARKS/bump; echo 2 > api/version.txt; echo 2 > ui/version.txt; echo junk > ui/junk.txt"
emits_files = ["api/version.txt", "ui/version.txt"]

[[workflow.task]]
name = "hang"
kind = "command"
command = '''
echo x >> $MARKS/hang
if [ ! -f $MARKS/armed ]; then echo half > api/half.txt; $WRECK; touch $MARKS/armed; sleep 60; fi
test ! -e api/half.txt && test ! -e ui/junk.txt && test "$(cat api/version.txt)" = 2
'''
depends_on = ["bump"]
"""


@pytest.mark.parametrize(
    "wreck",
    [
        "true",
        "rm -rf ui/.git",  # one component cannot be reset: every component is made again
    ],
)
def test_a_killed_composite_playbook_resumes_every_component_from_its_base(
    tmp_path: Path, wreck: str
) -> None:
    heads = {
        "api": repository(tmp_path / "upstream" / "api", {"version.txt": "1\n"}),
        "ui": repository(tmp_path / "upstream" / "web", {"version.txt": "1\n", "index.html": "<p>\n"}),
    }
    pack = tmp_path / "pack"
    domain(pack / "domains" / "api", tmp_path / "upstream" / "api")
    domain(pack / "domains" / "web", tmp_path / "upstream" / "web")
    (pack / "crucible.toml").write_text(COMPOSITE.split("[[workflow.task]]")[0] + RESUMED)
    marks = tmp_path / "marks"
    marks.mkdir()
    env = crucible_env(MARKS=str(marks), WRECK=wreck)
    argv = ["run", "--manifest", str(pack / "crucible.toml"), "--max-cost", "1", "--max-time", "5m"]
    proc = subprocess.Popen(
        [str(CRUCIBLE), *argv],
        cwd=pack,
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(600):
            if (marks / "armed").exists():
                break
            time.sleep(0.05)
        assert (marks / "armed").exists()
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    workspace = pack / "workspace"
    assert (workspace / "api" / "half.txt").exists()  # the task in flight had written there

    resumed = run_crucible(*argv, "--resume", cwd=pack, env=env)

    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert (marks / "bump").read_text().count("x") == 1  # settled: never dispatched again
    assert (marks / "hang").read_text().count("x") == 2  # in flight when killed: runs again
    # each component: back to its base, then the passing task's declared files, committed as its
    for name, head in heads.items():
        assert git(workspace / name, "log", "--format=%s").splitlines() == ["crucible: task bump", "upstream"]
        assert git(workspace / name, "rev-parse", "HEAD~1") == head
        assert (workspace / name / "version.txt").read_text() == "2\n"
    assert not (workspace / "api" / "half.txt").exists() and not (workspace / "ui" / "junk.txt").exists()
    identities = [e for e in events(pack) if e["kind"] == "identity"]
    assert [part_tokens.decode(e["base_commit"]) for e in identities] == [heads, heads]
    assert identities[1]["resumed"] is True


def test_a_components_publish_target_is_refused_by_name_before_anything_exists(tmp_path: Path) -> None:
    repository(tmp_path / "upstream" / "api", {"version.txt": "1\n"})
    repository(tmp_path / "upstream" / "web", {"version.txt": "1\n"})
    pack = tmp_path / "pack"
    domain(pack / "domains" / "api", tmp_path / "upstream" / "api")
    domain(pack / "domains" / "web", tmp_path / "upstream" / "web")
    with (pack / "domains" / "web" / "crucible.toml").open("a") as out:
        out.write('\n[publish]\npr_repo = "example/web"\n')
    (pack / "crucible.toml").write_text(COMPOSITE)

    done = run_crucible(
        "run", "--manifest", pack / "crucible.toml", "--max-cost", "1", "--max-time", "5m", "--ui", "headless"
    )

    assert done.returncode == 16, done.stdout + done.stderr
    assert "[publish] of component(s) ui is not supported" in done.stderr
    assert not (pack / "workspace").exists() and not (pack / "state" / "session.jsonl").exists()


def test_a_component_replaced_by_a_link_never_leads_the_engines_git_elsewhere(tmp_path: Path) -> None:
    repository(tmp_path / "upstream" / "api", {"version.txt": "1\n"})
    repository(tmp_path / "upstream" / "web", {"version.txt": "1\n"})
    outside = tmp_path / "outside"
    outside_head = repository(outside, {"mine.txt": "committed\n"})
    (outside / "mine.txt").write_text("uncommitted work\n")
    (outside / "untracked.txt").write_text("mine\n")
    pack = tmp_path / "pack"
    domain(pack / "domains" / "api", tmp_path / "upstream" / "api")
    domain(pack / "domains" / "web", tmp_path / "upstream" / "web")
    task = f'[[workflow.task]]\nname = "swap"\nkind = "command"\ncommand = "rm -rf ui && ln -s {outside} ui; exit 1"\n'
    (pack / "crucible.toml").write_text(COMPOSITE.split("[[workflow.task]]")[0] + task)

    done = run_crucible(
        "run", "--manifest", pack / "crucible.toml", "--max-cost", "1", "--max-time", "5m", "--ui", "headless"
    )

    assert done.returncode != 0
    assert "component 'ui'" in done.stderr and "no longer a directory" in done.stderr
    assert (outside / "mine.txt").read_text() == "uncommitted work\n"
    assert (outside / "untracked.txt").read_text() == "mine\n"
    assert git(outside, "rev-parse", "HEAD") == outside_head
    assert git(outside, "log", "--format=%s").splitlines() == ["upstream"]


def test_a_composite_playbooks_own_publish_is_refused_by_name_before_anything_exists(tmp_path: Path) -> None:
    repository(tmp_path / "upstream" / "api", {"version.txt": "1\n"})
    repository(tmp_path / "upstream" / "web", {"version.txt": "1\n"})
    pack = tmp_path / "pack"
    domain(pack / "domains" / "api", tmp_path / "upstream" / "api")
    domain(pack / "domains" / "web", tmp_path / "upstream" / "web")
    (pack / "crucible.toml").write_text(COMPOSITE + '\n[publish]\npr_repo = "example/api"\n')

    done = run_crucible(
        "run", "--manifest", pack / "crucible.toml", "--max-cost", "1", "--max-time", "5m", "--ui", "headless"
    )

    assert done.returncode == 16, done.stdout + done.stderr
    assert "[publish] of the composite is not supported" in done.stderr
    assert not (pack / "workspace").exists() and not (pack / "state" / "session.jsonl").exists()
