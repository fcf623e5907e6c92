"""Core without the optional view plugins: `--ui rich`, `crucible flow` and `crucible diff` name the
distribution to install, and a terminal falls back to the plain console without a word."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest

from crucible_core.errors import PluginError
from crucible_core.plugins import load_plugins
from crucible_core.reporters.console import ConsoleReporter
from crucible_core.session.shell import make_reporter
from tests.cli_support import crucible_env, run_crucible

FLOW_LOG = Path(__file__).parents[1] / "flow" / "fixtures" / "crucible_run.jsonl"
# what the counter example runs on, and nothing else: no live console, no flow page
COUNTER_PLUGINS = "world_git,judge_command,backend_local"


def test_a_terminal_without_the_live_console_gets_the_plain_lines() -> None:
    plugins = load_plugins(names=["core"])
    leader, follower = os.openpty()
    try:
        with open(follower, "w", closefd=False) as tty:
            assert type(make_reporter(plugins, "console", 3, tty)) is ConsoleReporter
    finally:
        os.close(leader)
        os.close(follower)


def test_ui_rich_without_its_plugin_names_the_distribution() -> None:
    with pytest.raises(PluginError) as refused:
        make_reporter(load_plugins(names=["core"]), "rich", 3, io.StringIO())
    assert "unknown reporter 'rich' in --ui" in refused.value.message
    assert "`pip install crucible-plugin-console-rich` provides it" in refused.value.message


def test_run_and_check_refuse_ui_rich_without_its_plugin(example) -> None:
    manifest = example("counter")
    env = crucible_env(CRUCIBLE_LOAD_PLUGINS=COUNTER_PLUGINS)
    run = run_crucible("--manifest", manifest, "--iterations", "1", "--ui", "rich", env=env)
    assert run.returncode == 12, run.stderr
    assert "pip install crucible-plugin-console-rich" in run.stderr and "Traceback" not in run.stderr
    assert not (manifest.parent / "state" / "session.jsonl").exists()  # refused before the run began
    check = run_crucible("check", "--manifest", manifest, "--ui", "rich", env=env)
    assert check.returncode == 13, check.stdout + check.stderr
    assert "FAIL unknown reporter 'rich' in --ui" in check.stdout
    assert "pip install crucible-plugin-console-rich" in check.stdout
    # with the plugin installed the same check passes that line
    done = run_crucible("check", "--manifest", manifest, "--ui", "rich", env=crucible_env())
    assert "ok   --ui rich: reporter from crucible-plugin-console-rich" in done.stdout, done.stdout


def test_flow_without_the_page_plugin_names_the_distribution(tmp_path: Path) -> None:
    env = crucible_env(CRUCIBLE_LOAD_PLUGINS=COUNTER_PLUGINS)
    for ext in ("html", "json"):  # every rendering is the plugin's, the page and the data alike
        page = run_crucible("flow", "--session", FLOW_LOG, "--out", tmp_path / f"flow.{ext}", env=env)
        assert page.returncode == 64 and "Traceback" not in page.stderr
        assert "no such command 'flow'" in page.stderr
        assert "pip install crucible-plugin-flow-page" in page.stderr
        assert not (tmp_path / f"flow.{ext}").exists()
    # core's own commands that read a run need no plugin
    results = run_crucible("results", "--session", FLOW_LOG, "--json", env=env)
    assert results.returncode == 0, results.stderr
    assert json.loads(results.stdout)["kept"] == 3


def test_diff_without_the_git_world_plugin_names_the_distribution(example) -> None:
    manifest = example("counter")
    env = crucible_env(CRUCIBLE_LOAD_PLUGINS="judge_command,backend_local")
    done = run_crucible("diff", "--manifest", manifest, "--stat", env=env)
    assert done.returncode == 64 and "Traceback" not in done.stderr
    assert "no such command 'diff'" in done.stderr
    assert "pip install crucible-plugin-world-git" in done.stderr
