"""Core without crucible-plugin-lane-plan: `crucible plan run` and `plan show` name the distribution
to install, and core's own `plan` subcommands still work."""

from __future__ import annotations

from pathlib import Path

from tests.cli_support import crucible_env, run_crucible

PLAN = 'version = 1\n[budget]\nusd = 1\n[[task]]\nname = "x"\nkind = "command"\ncommand = "true"\n'


def test_plan_run_and_show_without_the_plugin_name_the_distribution(tmp_path: Path) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text(PLAN)
    env = crucible_env(CRUCIBLE_LOAD_PLUGINS="world_git,judge_command,backend_local")
    for sub in ("run", "show"):
        done = run_crucible("plan", sub, plan, cwd=tmp_path, env=env)
        assert done.returncode == 64 and "Traceback" not in done.stderr, done.stderr
        assert f"no such command '{sub}'" in done.stderr
        assert "pip install crucible-plugin-lane-plan" in done.stderr
    assert not (tmp_path / "state").exists()  # nothing ran
    assert run_crucible("plan", "states", env=env).returncode == 0


def test_plan_help_lists_the_plugin_subcommands() -> None:
    shown = run_crucible("plan", "--help")
    assert shown.returncode == 0, shown.stderr
    for sub in ("run", "show", "states", "exposure"):
        assert f"  {sub} " in shown.stdout
    listed = run_crucible("--help").stdout
    assert "plan run" not in listed  # a subcommand, not a command of its own
