"""`crucible init --template NAME`: every template scaffolds files whose `crucible check` passes."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.cli_support import crucible_env, run_crucible

GIT = ["git", "-c", "user.name=crucible-test", "-c", "user.email=test@example.invalid"]


def scaffold(tmp_path: Path, template: str) -> Path:
    repo = tmp_path / template
    repo.mkdir()
    subprocess.run([*GIT, "init", "-q"], cwd=repo, check=True)
    (repo / ".gitignore").write_text("workspace/\nstate/\n")
    done = run_crucible("init", "--template", template, cwd=repo)
    assert done.returncode == 0, done.stderr
    assert f"({template} template)" in done.stdout and "next:" in done.stdout
    subprocess.run([*GIT, "add", "-A"], cwd=repo, check=True)
    subprocess.run([*GIT, "commit", "-qm", "scaffold"], cwd=repo, check=True)
    return repo


@pytest.mark.parametrize("template", ["claude", "command", "python-speed"])
def test_every_template_passes_its_check(tmp_path: Path, template: str) -> None:
    repo = scaffold(tmp_path, template)
    # The claude template's preflight wants the CLI and credentials: a stand-in binary and a key.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "claude").write_text("#!/bin/sh\nexit 0\n")
    (bin_dir / "claude").chmod(0o755)
    env = crucible_env(PATH=f"{bin_dir}:/usr/bin:/bin", HOME=str(tmp_path), ANTHROPIC_API_KEY="sk-test")
    done = run_crucible("check", cwd=repo, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "can start a turn" in done.stdout
    assert "check passed" in done.stdout
    assert "measured the workspace: valid=True" in done.stdout


def test_python_speed_measure_refuses_a_wrong_answer(tmp_path: Path) -> None:
    repo = scaffold(tmp_path, "python-speed")
    (repo / "slow.py").write_text("def count_primes(n):\n    return 0\n")
    reading = json.loads(
        subprocess.run(["python3", "measure.py"], cwd=repo, capture_output=True, text=True).stdout
    )
    assert reading["valid"] is False and "returned 0, expected 1" in reading["note"]


def test_the_command_template_runs_and_keeps_its_proposals(tmp_path: Path) -> None:
    repo = scaffold(tmp_path, "command")
    done = run_crucible("run", "--iterations", "3", cwd=repo)
    assert done.returncode == 0, done.stderr
    results = json.loads(run_crucible("results", "--json", cwd=repo).stdout)
    assert [(r["decision"], r["score"]) for r in results["rows"]] == [("keep", 1), ("keep", 2), ("keep", 3)]


def test_the_default_is_claude_and_nothing_is_overwritten(tmp_path: Path) -> None:
    done = run_crucible("init", "--dir", tmp_path)
    assert done.returncode == 0 and "(claude template)" in done.stdout
    assert 'backend = "local"' in (tmp_path / "crucible.toml").read_text()
    again = run_crucible("init", "--template", "command", "--dir", tmp_path)
    assert again.returncode == 11 and "refusing to overwrite" in again.stderr
    assert not (tmp_path / "propose.sh").exists()
    unknown = run_crucible("init", "--template", "nope", "--dir", tmp_path)
    assert unknown.returncode == 64


def test_without_the_claude_plugin_init_names_it_and_the_command_template_still_works(tmp_path: Path) -> None:
    env = crucible_env(CRUCIBLE_LOAD_PLUGINS="core,world_git,judge_command,backend_local,packs")
    for args in ((), ("--template", "python-speed")):
        refused = run_crucible("init", *args, "--dir", tmp_path, env=env)
        assert refused.returncode == 12, refused.stdout + refused.stderr
        assert "pip install crucible-plugin-harness-claude" in refused.stderr
        assert not (tmp_path / "crucible.toml").exists()
    listed = run_crucible("init", "--help", env=env).stdout.split("Templates:")[1]
    names = [line.split()[0] for line in listed.splitlines() if line[:3].strip() and line.strip()]
    assert names == ["command"]  # continuation lines are indented further
    # the playbook template is a workflow.star: it comes with the Starlark plugin
    refused = run_crucible("init", "--template", "playbook", "--dir", tmp_path, env=env)
    assert refused.returncode == 12 and "pip install crucible-plugin-workflow-starlark" in refused.stderr
    assert not (tmp_path / "crucible.toml").exists()
    assert "python-speed" in run_crucible("init", "--help").stdout  # the plugin's, when installed
    done = run_crucible("init", "--template", "command", "--dir", tmp_path, env=env)
    assert done.returncode == 0 and "(command template)" in done.stdout


def test_without_the_packs_plugin_init_names_it(tmp_path: Path) -> None:
    # `crucible init` and its command template are crucible-plugin-packs': a usage error naming it
    env = crucible_env(CRUCIBLE_LOAD_PLUGINS="core,world_git,judge_command,backend_local,harness_claude")
    refused = run_crucible("init", "--template", "command", "--dir", tmp_path, env=env)
    assert refused.returncode == 64 and "pip install crucible-plugin-packs" in refused.stderr
    assert not (tmp_path / "crucible.toml").exists()


def test_the_playbook_template_checks_and_runs_once_without_a_judge(tmp_path: Path) -> None:
    repo = scaffold(tmp_path, "playbook")
    checked = run_crucible("check", cwd=repo)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "workflow (playbook) compiled and validated" in checked.stdout
    done = run_crucible("run", "--max-cost", "0.5", "--max-time", "5m", cwd=repo)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "playbook valid" in done.stdout
    report = json.loads((repo / "workspace" / "out" / "report.json").read_text())
    assert report == {"summarize": {"summary": "3 entries in the workspace"}}  # the agent task ran
    outcome = json.loads((repo / "workspace" / "outcome.json").read_text())["outcome"]
    assert outcome["verdict"] == "pass" and set(outcome["tasks"]) == {"gather", "summarize", "report"}
