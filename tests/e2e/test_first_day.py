"""A new user's set-up, as they would type it: where init is run, what git sees, what check says.

Each test walks the real CLI (a subprocess: the user's shell, PATH and HOME) through one trap of
the first day: no repository yet, a manifest in a subdirectory, run directories git would take
in, a mistyped command, a command run from a subdirectory, and bringing the result home.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.cli_support import CRUCIBLE, crucible_env, run_crucible

GIT = ["git", "-c", "user.name=crucible-test", "-c", "user.email=test@example.invalid"]


def user_env(home: Path) -> dict[str, str]:
    home.mkdir(exist_ok=True)
    return crucible_env(
        PATH=f"{CRUCIBLE.parent}:/usr/local/bin:/usr/bin:/bin",
        HOME=str(home),
        GIT_AUTHOR_NAME="t",
        GIT_AUTHOR_EMAIL="t@example.invalid",
        GIT_COMMITTER_NAME="t",
        GIT_COMMITTER_EMAIL="t@example.invalid",
    )


def sh(command: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["sh", "-c", command], cwd=cwd, env=env, capture_output=True, text=True)


def git(repo: Path, *args: str) -> str:
    return subprocess.run([*GIT, *args], cwd=repo, check=True, capture_output=True, text=True).stdout


def test_outside_a_repository_the_suggested_first_commit_leaves_the_run_out(tmp_path: Path) -> None:
    env = user_env(tmp_path / "home")
    project = tmp_path / "project"
    project.mkdir()
    (project / "app.txt").write_text("my code\n")
    init = run_crucible("init", "--template", "command", cwd=project, env=env)
    assert init.returncode == 0, init.stderr
    assert "not a git repository yet" in init.stdout and "git init && git add -A" in init.stdout
    # A first run before any commit fails and says to commit: the user does exactly that.
    first = run_crucible("run", "--iterations", "1", cwd=project, env=env)
    assert first.returncode == 4 and "git init && git add -A && git commit" in first.stderr
    assert (project / "state" / "session.jsonl").is_file()
    assert sh("git init -q && git add -A && git commit -qm start", project, env).returncode == 0
    tracked = git(project, "ls-files").split()
    assert not [path for path in tracked if path.startswith(("state/", "workspace"))], tracked
    assert ".gitignore" in tracked
    resumed = run_crucible("run", "--resume", "--iterations", "1", cwd=project, env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert git(project, "status", "--porcelain") == ""  # the run's files stay out of the user's view


def test_init_in_a_subdirectory_names_the_repository_above(tmp_path: Path) -> None:
    env = user_env(tmp_path / "home")
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "README").write_text("project\n")
    init = run_crucible("init", "--template", "command", "--dir", "tools/crucible", cwd=repo, env=env)
    assert init.returncode == 0, init.stderr
    manifest = repo / "tools" / "crucible" / "crucible.toml"
    assert 'path = "../.."' in manifest.read_text()
    assert "/workspace/" in (manifest.parent / ".gitignore").read_text()
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "domain")
    check = run_crucible("check", cwd=manifest.parent, env=env)
    assert check.returncode == 0, check.stdout + check.stderr
    run = run_crucible("run", "--iterations", "1", cwd=manifest.parent, env=env)
    assert run.returncode == 0, run.stderr
    assert (manifest.parent / "workspace" / "README").is_file()  # a clone of the whole repository
    assert git(repo, "status", "--porcelain") == ""


def test_check_warns_when_git_would_take_in_the_workspace_and_state(tmp_path: Path) -> None:
    env = user_env(tmp_path / "home")
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    assert run_crucible("init", "--template", "command", cwd=repo, env=env).returncode == 0
    (repo / ".gitignore").write_text("*.pyc\n")  # the user's own ignore file, without the run's dirs
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "domain")
    check = run_crucible("check", cwd=repo, env=env)
    assert check.returncode == 0, check.stdout
    warning = next(line for line in check.stdout.splitlines() if "no ignore file covers them" in line)
    assert warning.startswith("WARN workspace/ and state/") and "embedded repository" in warning
    assert "add /workspace/ /state/ to" in warning
    (repo / ".gitignore").write_text("*.pyc\nworkspace\n/state/\n")
    assert "no ignore file covers" not in run_crucible("check", cwd=repo, env=env).stdout


def test_a_command_template_check_is_short_and_its_gate_self_test_runs(tmp_path: Path) -> None:
    env = user_env(tmp_path / "home")
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    assert run_crucible("init", "--template", "command", cwd=repo, env=env).returncode == 0
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "domain")
    check = run_crucible("check", cwd=repo, env=env)
    assert check.returncode == 0, check.stdout
    lines = check.stdout.splitlines()
    assert len(lines) <= 16, check.stdout
    assert "ok   gate self-test: good 1 beats bad 0 (higher is better)" in lines
    assert not [line for line in lines if line.startswith("WARN")], check.stdout
    bounds = [line for line in lines if "Output bounds" in line]
    # a command agent is handed the broker only when [agent.broker] asks, so no bound applies to it
    assert len(bounds) == 1 and "none apply" in bounds[0] and "[agent.broker] asks" in bounds[0], bounds


def test_a_missing_self_test_warning_says_what_to_add(example) -> None:
    manifest = example("counter")
    check = run_crucible("check", "-m", manifest)
    assert check.returncode == 0, check.stdout
    warning = next(line for line in check.stdout.splitlines() if "[judge.selftest]" in line)
    assert warning.startswith("WARN") and "good_cmd" in warning and "bad_cmd" in warning


def test_a_mistyped_command_suggests_the_right_one() -> None:
    done = run_crucible("rnu")
    assert done.returncode == 64
    assert "no such command 'rnu' (did you mean 'run'?)" in done.stderr
    assert "did you mean" not in run_crucible("zzzzzz").stderr


def test_flow_takes_the_manifest_and_names_it_from_a_subdirectory(example, tmp_path: Path) -> None:
    manifest = example("counter")
    assert run_crucible("run", "-m", manifest, "--iterations", "2").returncode == 0
    out = tmp_path / "flow.json"
    done = run_crucible("flow", "-m", manifest, "--out", out)
    assert done.returncode == 0, done.stderr
    assert "2 iterations" in done.stdout and out.is_file()
    below = manifest.parent / "notes" / "deep"
    below.mkdir(parents=True)
    lost = run_crucible("flow", "--out", out, cwd=below)
    assert lost.returncode == 11
    assert "pass -m ../../crucible.toml" in lost.stderr and "--session state/session.jsonl" not in lost.stderr
    moved = run_crucible("diff", cwd=below)
    assert moved.returncode == 10 and "pass -m ../../crucible.toml" in moved.stderr


def test_the_best_result_comes_back_with_diff_and_git_apply(tmp_path: Path) -> None:
    env = user_env(tmp_path / "home")
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    assert run_crucible("init", "--template", "command", cwd=repo, env=env).returncode == 0
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "domain")
    assert run_crucible("run", "--iterations", "2", cwd=repo, env=env).returncode == 0
    assert not (repo / "progress.txt").exists()  # the run never touches the user's checkout
    applied = sh("crucible diff --best | git apply", repo, env)
    assert applied.returncode == 0, applied.stderr
    assert (repo / "progress.txt").read_text() == "step 1\nstep 2\n"
