"""Every section a playbook accepts acts, or is refused by name; its outcomes say how it ended.

`[repo].ref` and `[workspace].setup_cmd` make the workspace as they do for the loop; `[world]` and
`[outputs]` are refused with exit 16 before anything exists ([publish] acts: tests/publish_github/
test_playbook_publish.py); a failed graph ends `error`, not `finished`;
and a playbook or a plan file that already ended, run again, says how to start a new one.
Driven in-process: no real process is the point here.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import attrs
import pytest

from crucible_core.cli.main import main
from crucible_core.session_log import read_events

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", "-c", "commit.gpgsign=false"]


def manifest(root: Path, sections: str, command: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    path = root / "crucible.toml"
    path.write_text(
        '[workflow]\ntype = "playbook"\n\n'
        + sections
        + '\n[agent]\ngoal = "look"\nbackend = "command"\nagent_cmd = "true"\n\n'
        + f'[[workflow.task]]\nname = "look"\nkind = "command"\ncommand = {json.dumps(command)}\n'
    )
    return path


@attrs.frozen
class Done:
    exit_code: int
    output: str  # stdout and stderr


def crucible(capsys: pytest.CaptureFixture[str], *args: str | Path) -> Done:
    """The real entry point in this process, its errors rendered and its exit code taken as a user sees them."""
    capsys.readouterr()
    try:
        main([str(a) for a in args])
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return Done(code, out + err)


def play(capsys: pytest.CaptureFixture[str], path: Path, *extra: str) -> Done:
    return crucible(
        capsys, "run", "--manifest", path, "--max-cost", "1", "--max-time", "5m", "--ui", "headless", *extra
    )


def log(path: Path) -> list[dict[str, Any]]:
    return list(read_events(path.parent / "state" / "session.jsonl"))


def test_a_playbook_starts_from_its_repo_at_the_ref(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run([*GIT, "init", "-q", str(repo)], check=True)
    for text, tag in (("one", "v1"), ("two", None)):
        (repo / "f.txt").write_text(text + "\n")
        subprocess.run([*GIT, "-C", str(repo), "add", "f.txt"], check=True)
        subprocess.run([*GIT, "-C", str(repo), "commit", "-q", "-m", text], check=True)
        if tag:
            subprocess.run([*GIT, "-C", str(repo), "tag", tag], check=True)
    path = manifest(
        tmp_path / "pack",
        f'[repo]\npath = "{repo}"\nref = "v1"\n\n[workspace]\ndir = "workspace"\n',
        'test "$(cat f.txt)" = one',
    )
    done = play(capsys, path)
    assert done.exit_code == 0, done.output
    assert (path.parent / "workspace" / "f.txt").read_text() == "one\n"  # v1, not HEAD
    assert log(path)[-1]["outcome"] == "finished"


def test_a_playbook_runs_its_setup_cmd(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = manifest(
        tmp_path / "pack",
        '[workspace]\ndir = "workspace"\nsetup_cmd = "mkdir -p workspace && echo made > workspace/made.txt"\n',
        "test -f made.txt",
    )
    done = play(capsys, path)
    assert done.exit_code == 0, done.output
    assert [e["status"] for e in log(path) if e["kind"] == "task_result"] == ["pass"]


@pytest.mark.parametrize(
    ("section", "named"),
    [
        ('[world]\nkind = "command"\n', "[world] on a playbook is not supported"),
        ("[outputs.draft-pr]\ncount = 1\n", "[outputs] on a playbook is not supported"),
    ],
    ids=["world", "outputs"],
)
def test_a_loop_section_on_a_playbook_is_refused_by_name_before_anything_exists(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], section: str, named: str
) -> None:
    path = manifest(tmp_path / "pack", section, "true")
    done = play(capsys, path)
    assert done.exit_code == 16, done.output
    assert named in done.output
    assert not (path.parent / "state").exists() and not (path.parent / "workspace").exists()


def test_a_failed_playbook_ends_error_and_is_invalid(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = manifest(tmp_path / "pack", "", "exit 3")
    done = play(capsys, path)
    assert done.exit_code == 4
    assert "playbook invalid" in done.output
    final = log(path)[-1]
    assert final["kind"] == "shutdown" and final["outcome"] == "error"  # not an exhausted graph


PLAN = """
version = 1
[budget]
usd = 1.0
[[task]]
name = "look"
kind = "command"
command = "true"
"""


@pytest.mark.parametrize("lane", ["playbook", "plan"])
def test_an_ended_run_again_says_how_to_start_a_new_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], lane: str
) -> None:
    if lane == "playbook":
        path = manifest(tmp_path / "pack", "", "true")

        def again(*extra: str) -> Done:
            return play(capsys, path, *extra)

    else:
        path = tmp_path / "plan.toml"
        path.write_text(PLAN)
        (tmp_path / "ws").mkdir()

        def again(*extra: str) -> Done:
            return crucible(
                capsys, "plan", "run", path, "--workspace", tmp_path / "ws", "--ui", "headless", *extra
            )

    assert again().exit_code == 0
    session = path.parent / "state" / "session.jsonl"
    before = session.read_bytes()
    rerun = again()
    assert rerun.exit_code == 11
    assert f"already holds a {lane} run, which ended (finished)" in rerun.output
    assert (
        "to start a new run, move" in rerun.output
        and "--resume only prints its verdict again" in rerun.output
    )
    resumed = again("--resume")
    assert resumed.exit_code == 0
    assert "already finished" in resumed.output and "to start a new one, move" in resumed.output
    assert session.read_bytes() == before  # neither wrote a line
