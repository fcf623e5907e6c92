"""A new user's first hour, step by step through the real CLI: every step either works or says what to do.

init -> commit -> check -> run -> show / results / RESULTS.md / flow -> steer -> resume with a
larger budget; plus the traps a first hour falls into: uncommitted edits, an agent that cannot
start, a solved run that should go on, and the README's own commands.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from tests.cli_support import CRUCIBLE, ROOT, crucible_env, run_crucible
from tests.e2e.session import events

GIT = ["git", "-c", "user.name=crucible-test", "-c", "user.email=test@example.invalid"]
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"


def user_env(home: Path, **extra: str) -> dict[str, str]:
    """A new user's shell: crucible on PATH, no Claude CLI, an empty home (no login)."""
    home.mkdir(exist_ok=True)
    return crucible_env(PATH=f"{CRUCIBLE.parent}:{SYSTEM_PATH}", HOME=str(home), **extra)


def git(repo: Path, *args: str) -> str:
    return subprocess.run([*GIT, *args], cwd=repo, check=True, capture_output=True, text=True).stdout


def new_repo(path: Path) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q")
    (path / "README").write_text("my project\n")
    git(path, "add", "-A")
    git(path, "commit", "-qm", "start")
    return path


def crucible(repo: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return run_crucible(*args, cwd=repo, env=env)


def command_domain(tmp_path: Path, env: dict[str, str]) -> Path:
    repo = new_repo(tmp_path / "repo")
    done = crucible(repo, env, "init", "--template", "command")
    assert done.returncode == 0 and "(command template)" in done.stdout, done.stderr
    (repo / ".gitignore").write_text("workspace/\nstate/\n")
    return repo


def session_lines(repo: Path) -> int:
    return len((repo / "state" / "session.jsonl").read_text().splitlines())


def test_the_first_hour_walk(tmp_path: Path) -> None:
    env = user_env(tmp_path / "home")
    repo = command_domain(tmp_path, env)
    prompts = tmp_path / "prompts"
    prompts.mkdir()
    # The proposer keeps each prompt it is given, so the walk can read what the agent is told.
    propose = repo / "propose.sh"
    propose.write_text(
        propose.read_text() + f'cp "$CRUCIBLE_PROMPT_FILE" {prompts}/$CRUCIBLE_ITERATION.txt\n'
    )
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "crucible domain")

    check = crucible(repo, env, "check")
    assert check.returncode == 0, check.stdout + check.stderr
    assert "ok   backend command can start a turn" in check.stdout
    assert "uncommitted" not in check.stdout
    assert check.stdout.rstrip().endswith("check passed")

    run = crucible(repo, env, "run", "--iterations", "3")
    assert run.returncode == 0, run.stderr
    assert "run ended: finished (iterations spent (3))" in run.stderr

    show = crucible(repo, env, "show")
    assert show.returncode == 0 and "best 3 (baseline 0); 3 kept over 3 iterations" in show.stdout
    results = crucible(repo, env, "results")
    assert results.returncode == 0 and "best 3 vs baseline 0" in results.stdout
    assert "| 3 | keep | 3 |" in (repo / "workspace" / "RESULTS.md").read_text()
    flow = crucible(repo, env, "flow")
    assert flow.returncode == 0 and "wrote flow.html (3 iterations, outcome finished)" in flow.stdout
    assert (repo / "flow.html").read_text().startswith("<!doctype html>")

    # The agent is told the truth about the measure it can see in its workspace.
    prompt = (prompts / "1.txt").read_text()
    assert "cannot see" not in prompt
    assert "you may read them" in prompt and "cannot change the score" in prompt

    # Steering a run that is not live says how to steer its next start instead.
    steer = crucible(repo, env, "steer", "add two lines next time")
    assert steer.returncode == 14 and "put the text in STEER.md" in steer.stderr

    # Resuming a finished run without more budget says how to give it more.
    again = crucible(repo, env, "run", "--resume")
    assert again.returncode == 0 and "raise the budget to continue it (e.g. --iterations 8)" in again.stderr
    (repo / "STEER.md").write_text("add two lines next time\n")
    more = crucible(repo, env, "run", "--resume", "--iterations", "5")
    assert more.returncode == 0, more.stderr
    assert "steer delivered to iteration 4" in more.stderr
    assert "run ended: finished (iterations spent (5))" in more.stderr
    assert "add two lines next time" in (prompts / "4.txt").read_text()
    final = json.loads(crucible(repo, env, "results", "--json").stdout)
    assert [(r["iter"], r["decision"]) for r in final["rows"]][-2:] == [(4, "keep"), (5, "keep")]


def test_the_readme_commands_work_as_written(tmp_path: Path) -> None:
    """The README's "Using it" walk, each line run as written in a fresh repository."""
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Using it") : readme.index("## Documentation")]
    blocks = re.findall(r"```sh\n(.*?)```", section, re.S)
    install, walk = blocks[0], blocks[1]
    assert "pip install . ./crucible_core ./plugins/*" in install  # every plugin the meta-package needs
    env = user_env(tmp_path / "home", GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.invalid")
    env.update(GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.invalid")
    repo = new_repo(tmp_path / "repo")
    for line in walk.splitlines():
        command = line.split("  #")[0].strip()
        if not command:
            continue
        done = subprocess.run(["sh", "-c", command], cwd=repo, env=env, capture_output=True, text=True)
        assert done.returncode == 0, f"{command}: {done.stdout}{done.stderr}"
    assert (repo / "flow.html").is_file()
    assert "crucible diff --best | git apply" in walk  # the walk ends with the result in the checkout
    assert (repo / "progress.txt").read_text().splitlines() == [f"step {n}" for n in range(1, 7)]
    assert git(repo, "status", "--porcelain").split() == ["??", "flow.html", "??", "progress.txt"]


def test_uncommitted_edits_are_named_and_start_from_worktree_carries_them(tmp_path: Path) -> None:
    env = user_env(tmp_path / "home")
    repo = command_domain(tmp_path, env)
    (repo / "progress.txt").write_text("committed\n")
    (repo / "gone.txt").write_text("deleted in the working tree\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "domain")
    head = git(repo, "rev-parse", "HEAD").strip()
    (repo / "progress.txt").write_text("committed\nedited\nedited\n")  # 3 lines, 1 committed
    (repo / "notes.txt").write_text("untracked\n")
    (repo / "gone.txt").unlink()
    (repo / "measure.sh").write_text(
        (repo / "measure.sh").read_text() + "# mine\n"
    )  # an inject: read as it is
    status_before = git(repo, "status", "--porcelain")

    check = crucible(repo, env, "check")
    assert check.returncode == 0, check.stdout
    warning = f"WARN the repository has uncommitted changes; the run starts from HEAD {head[:12]}"
    assert warning in check.stdout
    assert (
        "without gone.txt, notes.txt, progress.txt:" in check.stdout
        and 'start_from = "worktree"' in check.stdout
    )
    run = crucible(repo, env, "run", "--iterations", "1")
    assert run.returncode == 0 and "the repository has uncommitted changes" in run.stderr
    baseline = next(e["row"] for e in events(repo / "crucible.toml") if e["kind"] == "row")
    assert baseline["score"] == 1  # the committed file was measured, as the warning said

    # The same checkout, starting from its working tree instead.
    subprocess.run(["rm", "-rf", str(repo / "workspace"), str(repo / "state")], check=True)
    manifest = repo / "crucible.toml"
    manifest.write_text(manifest.read_text().replace('path = "."', 'path = "."\nstart_from = "worktree"'))
    check = crucible(repo, env, "check")
    assert check.returncode == 0 and "the run starts from the working tree of ." in check.stdout
    assert "WARN the repository" not in check.stdout
    run = crucible(repo, env, "run", "--iterations", "1")
    assert run.returncode == 0, run.stderr
    baseline = next(e["row"] for e in events(manifest) if e["kind"] == "row")
    assert baseline["score"] == 3
    workspace = repo / "workspace"
    assert (workspace / "notes.txt").is_file() and not (workspace / "gone.txt").exists()
    assert "crucible.toml" not in git(workspace, "status", "--porcelain")  # the edits are the baseline commit
    # the user's checkout is only read
    assert git(repo, "status", "--porcelain").replace(" M crucible.toml\n", "") == status_before
    assert git(repo, "rev-parse", "HEAD").strip() == head


def test_start_from_is_validated(tmp_path: Path) -> None:
    env = user_env(tmp_path / "home")
    repo = command_domain(tmp_path, env)
    manifest = repo / "crucible.toml"
    text = manifest.read_text()
    manifest.write_text(text.replace('path = "."', 'path = "."\nstart_from = "working"'))
    done = crucible(repo, env, "check")
    assert done.returncode == 10 and "[repo].start_from must be one of head, worktree" in done.stderr
    manifest.write_text(text.replace('path = "."', 'path = "."\nref = "main"\nstart_from = "worktree"'))
    done = crucible(repo, env, "check")
    assert done.returncode == 10 and 'start_from = "worktree" needs [repo].path and no ref' in done.stderr


def test_a_repository_that_is_not_git_says_how_to_make_it_one(tmp_path: Path) -> None:
    env = user_env(tmp_path / "home")
    plain = tmp_path / "plain"
    plain.mkdir()
    assert crucible(plain, env, "init", "--template", "command").returncode == 0
    done = crucible(plain, env, "check")
    assert done.returncode == 13 and "it is not a git repository" in done.stdout
    assert "git init && git add -A && git commit" in done.stdout


def test_check_and_run_say_what_the_default_agent_needs(tmp_path: Path) -> None:
    env = user_env(tmp_path / "home")
    repo = new_repo(tmp_path / "repo")
    assert crucible(repo, env, "init").returncode == 0  # the claude template
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "domain")
    check = crucible(repo, env, "check")
    assert check.returncode == 13
    assert "FAIL backend local (harness claude): the Claude Code CLI was not found" in check.stdout
    assert "npm install -g @anthropic-ai/claude-code" in check.stdout
    assert "no credentials for the Claude Code CLI: set ANTHROPIC_API_KEY" in check.stdout
    run = crucible(repo, env, "run", "--iterations", "2")
    assert run.returncode == 4 and "the agent cannot start" in run.stderr and "npm install" in run.stderr
    assert not (repo / "state" / "session.jsonl").exists() and not (repo / "workspace").exists()

    # A CLI on PATH and a login (the credentials file the CLI writes) satisfy it.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "claude").write_text("#!/bin/sh\nexit 0\n")
    (bin_dir / "claude").chmod(0o755)
    (tmp_path / "home" / ".claude").mkdir()
    (tmp_path / "home" / ".claude" / ".credentials.json").write_text("{}")
    env["PATH"] = f"{bin_dir}:{env['PATH']}"
    check = crucible(repo, env, "check")
    assert check.returncode == 0, check.stdout
    assert "ok   backend local (harness claude) can start a turn" in check.stdout


def test_check_names_an_agent_cmd_that_cannot_run(tmp_path: Path) -> None:
    env = user_env(tmp_path / "home")
    repo = command_domain(tmp_path, env)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "domain")
    manifest = repo / "crucible.toml"
    text = manifest.read_text()
    for agent_cmd, problem in (
        ("no-such-proposer --fast", "runs 'no-such-proposer', which is not on the agent's PATH"),
        ("./missing.sh", "runs './missing.sh', which does not exist in the workspace"),
    ):
        manifest.write_text(text.replace('agent_cmd = "./propose.sh"', f'agent_cmd = "{agent_cmd}"'))
        check = crucible(repo, env, "check")
        assert check.returncode == 13 and f"FAIL backend command: [agent].agent_cmd {problem}" in check.stdout
    # The run stops before its baseline; once the script is injected, a resume sets up again.
    run = crucible(repo, env, "run", "--iterations", "1")
    assert run.returncode == 4 and "which does not exist in the workspace" in run.stderr
    (repo / "missing.sh").write_text("#!/bin/sh\necho step >> progress.txt\n")
    (repo / "missing.sh").chmod(0o755)
    manifest.write_text(manifest.read_text().replace('"propose.sh"]', '"propose.sh", "missing.sh"]'))
    resumed = crucible(repo, env, "run", "--resume", "--iterations", "1")
    assert resumed.returncode == 0 and "run ended: finished (iterations spent (1))" in resumed.stderr


def test_a_solved_run_continues_only_with_no_early_stop(tmp_path: Path) -> None:
    env = user_env(tmp_path / "home")
    repo = command_domain(tmp_path, env)
    measure = repo / "measure.sh"
    solved = 'if [ "$lines" -ge 2 ]; then solved=true; else solved=false; fi\n'
    measure.write_text(
        measure.read_text().replace(
            'printf \'{"valid": true, "score": %s, "note": "lines=%s"}\\n\' "$lines" "$lines"',
            solved + 'printf \'{"valid": true, "score": %s, "solved": %s}\\n\' "$lines" "$solved"',
        )
    )
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "domain")
    run = crucible(repo, env, "run", "--iterations", "6")
    assert run.returncode == 0 and "run ended: solved (solved at iteration 2)" in run.stderr, run.stderr
    before = session_lines(repo)

    again = crucible(repo, env, "run", "--resume", "--iterations", "6")
    assert again.returncode == 0
    assert "solved at iteration 2" in again.stderr and "resume with --no-early-stop" in again.stderr
    assert session_lines(repo) == before  # nothing was written

    more = crucible(repo, env, "run", "--resume", "--no-early-stop", "--iterations", "4")
    assert more.returncode == 0, more.stderr
    assert "run ended: finished (iterations spent (4))" in more.stderr
    rows = [e["row"] for e in events(repo / "crucible.toml") if e["kind"] == "row"]
    assert [(r["iter"], r["decision"]) for r in rows][-2:] == [(3, "keep"), (4, "keep")]

    spent = crucible(repo, env, "run", "--resume", "--no-early-stop", "--iterations", "4")
    assert spent.returncode == 0 and "raise the budget to continue it" in spent.stderr
