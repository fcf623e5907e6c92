"""Workspace set-up paths: the default clone of [repo], and a manifest frozen inside its own repository."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.cli_support import run_crucible
from tests.e2e.session import events, rows

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


def test_a_manifest_inside_its_workspace_is_frozen_from_the_base_commit(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    make_repo(repo)
    manifest = repo / "crucible.toml"
    manifest.write_text(BYO)
    (repo / ".gitignore").write_text("state/\n")
    first = run_crucible("--manifest", manifest, "--iterations", "1")
    assert first.returncode == 0, first.stderr
    warnings = [e["msg"] for e in events(manifest) if e["kind"] == "note" and e.get("level") == "warn"]
    assert any("no pristine base commit exists yet" in w for w in warnings)
    # An edit to the manifest in the working tree must not retarget a later run's gate.
    manifest.write_text(BYO.replace('direction = "higher"', 'direction = "lower"'))
    second = run_crucible("--manifest", manifest, "--iterations", "1", "--state-dir", tmp_path / "state2")
    assert second.returncode == 0, second.stderr
    log = tmp_path / "state2" / "session.jsonl"
    later = [line for line in log.read_text().splitlines() if '"kind":"start"' in line]
    assert '"direction":"higher"' in later[0]
    notes = log.read_text()
    assert "differs from the copy in the workspace's base commit" in notes
