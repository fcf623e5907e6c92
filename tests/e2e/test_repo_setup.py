"""Workspace set-up paths: the default clone of [repo], and a manifest that may not target its own directory."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.cli_support import run_crucible
from tests.e2e.session import rows

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@localhost", "-c", "commit.gpgsign=false"]

MEASURE = """#!/bin/sh
printf '{"valid": true, "score": %s}\\n' "$(cat value.txt)"
"""


def make_repo(path: Path) -> None:
    path.mkdir(parents=True)
    (path / "value.txt").write_text("1\n")
    (path / "measure.sh").write_text(MEASURE)
    (path / "measure.sh").chmod(0o755)
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    subprocess.run([*GIT, "-C", str(path), "add", "-A"], check=True)
    subprocess.run([*GIT, "-C", str(path), "commit", "-qm", "upstream"], check=True)


def test_without_setup_cmd_the_repo_is_cloned(tmp_path: Path) -> None:
    make_repo(tmp_path / "upstream")
    pack = tmp_path / "pack"
    pack.mkdir()
    (pack / "crucible.toml").write_text(
        '[repo]\npath = "../upstream"\n\n[agent]\nbackend = "command"\n'
        'agent_cmd = "echo $(( $(cat value.txt) * 2 )) > value.txt"\ngoal = "double it"\n\n'
        '[judge]\nmeasure_cmd = "./measure.sh"\ndirection = "higher"\n'
    )
    done = run_crucible("--manifest", pack / "crucible.toml", "--iterations", "2")
    assert done.returncode == 0, done.stderr
    assert [r["score"] for r in rows(pack / "crucible.toml")] == [1, 2, 4]
    log = subprocess.run(
        ["git", "-C", str(pack / "workspace"), "log", "--format=%s"], capture_output=True, text=True
    )
    assert log.stdout.splitlines()[-1] == "upstream"  # the clone's history is the memory's root
    assert (tmp_path / "upstream" / "value.txt").read_text() == "1\n"  # upstream untouched


BYO = """[repo]
path = "."

[workspace]
dir = "."

[agent]
backend = "command"
agent_cmd = "echo $(( $(cat value.txt) + 1 )) > value.txt"
goal = "raise it"

[judge]
measure_cmd = "./measure.sh"
direction = "higher"
"""


def test_a_manifest_whose_workspace_is_its_own_directory_is_refused_and_nothing_is_touched(
    tmp_path: Path,
) -> None:
    """dir = "." would make the manifest's own repository (and the state dir in it) the thing a
    discard resets and cleans; the safe bring-your-own-repo form clones it (path = ".")."""
    repo = tmp_path / "repo"
    make_repo(repo)
    manifest = repo / "crucible.toml"
    manifest.write_text(BYO)
    (repo / "notes.txt").write_text("uncommitted work\n")
    head = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout
    for command in (["check"], ["run", "--iterations", "1"]):
        done = run_crucible(*command, "--manifest", manifest)
        assert done.returncode == 10, done.stderr
        assert "[workspace].dir = '.' is the manifest directory itself" in done.stderr + done.stdout
    assert (repo / "notes.txt").read_text() == "uncommitted work\n"
    assert not (repo / "state").exists()
    after = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout
    assert after == head
    # the supported form: clone the manifest's own repository into a workspace below it
    manifest.write_text(BYO.replace('dir = "."', 'dir = "workspace"'))
    (repo / ".gitignore").write_text("state/\nworkspace/\n")
    done = run_crucible("--manifest", manifest, "--iterations", "1")
    assert done.returncode == 0, done.stderr
    assert (repo / "workspace" / "value.txt").read_text() == "2\n"
    assert (repo / "value.txt").read_text() == "1\n"


def test_a_setup_cmd_does_not_stand_in_for_repo(example) -> None:
    """Only a playbook may leave out [repo] (C-MANIFEST); a setup_cmd builds the workspace of a
    manifest that still names its repository, and the run records it."""
    manifest = example("counter")
    manifest.write_text(manifest.read_text().replace('[repo]\npath = "."\n', ""))
    assert "[repo]" not in manifest.read_text()
    for command in (["check"], ["run", "--iterations", "1"]):
        done = run_crucible(*command, "--manifest", manifest)
        assert done.returncode == 10, done.stdout + done.stderr
        assert "[repo] is required: only a playbook may leave it out" in done.stderr
    assert not (manifest.parent / "state").exists() and not (manifest.parent / "workspace").exists()
