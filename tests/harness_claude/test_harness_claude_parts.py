"""The harness plugin's parts: registration, pricing, the CLI launch decisions, cursors, toolbox, failure classes."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from crucible_core.protocols import FailureClass
from crucible_harness_claude import launch
from crucible_harness_claude.cli_harness import ClaudeCodeHarness
from crucible_harness_claude.pricing import FALLBACK, PRICES, Usage, cost_usd, price_of
from crucible_harness_claude.sessions import Cursor, SessionStateError, SessionStore, hide_cursors
from crucible_harness_claude.toolbox import install_toolbox
from tests.harness_claude.support import Recorder, harness_context, make_turn


def test_loading_plugins_registers_both_harnesses_without_importing_the_sdk() -> None:
    probe = (
        "import sys\n"
        "from crucible_core.plugins import load_plugins\n"
        "names = load_plugins().registry('harness').names()\n"
        "print({'anthropic', 'claude'} <= set(names), 'anthropic' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "True False"


# -- pricing -----------------------------------------------------------------------------


def test_the_longest_model_prefix_sets_the_price() -> None:
    assert price_of("claude-opus-4-6") == (PRICES["claude-opus-4-6"], True)
    assert price_of("claude-opus-4-1-20250805") == (PRICES["claude-opus-4"], True)
    assert price_of("us.anthropic.claude-sonnet-4-6-v1:0") == (PRICES["claude-sonnet-4"], True)
    assert cost_usd("claude-sonnet-4-6", Usage(1_000_000, 1_000_000, 1_000_000, 1_000_000)) == pytest.approx(
        3.0 + 15.0 + 3.75 + 0.30
    )


def test_an_unknown_model_is_priced_at_the_dearest_rate() -> None:
    price, known = price_of("gpt-9")
    assert not known and price == FALLBACK
    assert all(p.output <= FALLBACK.output for p in PRICES.values())


# -- launching the CLI -------------------------------------------------------------------


def test_on_the_host_the_cli_runs_unattended_without_claiming_a_sandbox() -> None:
    args = launch.permission_args(launch.unattended_mode({}), ["broker"])
    assert args[args.index("--permission-mode") + 1] == "acceptEdits"
    assert args[args.index("--permission-prompts") + 1] == "none"
    assert args[args.index("--allowedTools") + 1] == "Bash,mcp__broker"
    assert "bypassPermissions" not in args and "--dangerously-skip-permissions" not in args


def test_inside_a_declared_sandbox_the_cli_bypasses_prompts() -> None:
    mode = launch.unattended_mode({"IS_SANDBOX": "1"})
    assert launch.permission_args(mode, []) == ["--permission-mode", "bypassPermissions"]


def test_the_child_env_drops_a_parent_session_and_keeps_manifest_choices() -> None:
    env = launch.child_env({"CLAUDECODE": "1", "PATH": "/bin", "DISABLE_AUTOUPDATER": "0"})
    assert "CLAUDECODE" not in env
    assert env["DISABLE_AUTOUPDATER"] == "0"  # [agent].env wins over the harness default
    assert env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1"


def test_a_missing_cli_is_a_spawn_failure_that_says_how_to_install_it(
    workspace: Path, private_dir: Path, tmp_path: Path
) -> None:
    harness = ClaudeCodeHarness.from_context(harness_context(tmp_path, private_dir))
    for env in (
        {"PATH": str(tmp_path)},
        {"PATH": "/bin", launch.CLI_BIN_ENV: str(tmp_path / "nope" / "claude")},
    ):
        result = harness.run(make_turn(workspace, env, Recorder()))
        assert result.failure is FailureClass.SPAWN and result.transport_failure
        assert "npm install -g @anthropic-ai/claude-code" in result.note


def stand_in_cli(tmp_path: Path, script: str) -> dict[str, str]:
    """A `claude` that is a shell script: for failures the real CLI will not produce on cue."""
    cli = tmp_path / "claude"
    cli.write_text("#!/bin/sh\n" + script)
    cli.chmod(0o755)
    return {"PATH": "/usr/bin:/bin", launch.CLI_BIN_ENV: str(cli)}


def test_a_stream_that_breaks_off_is_a_stream_failure(
    workspace: Path, private_dir: Path, tmp_path: Path
) -> None:
    init = json.dumps({"type": "system", "subtype": "init", "session_id": "s-1", "model": "m"})
    env = stand_in_cli(tmp_path, f'echo \'{init}\'\necho \'{{"type": "assistant", "mess\'\nexit 3\n')
    events = Recorder()
    harness = ClaudeCodeHarness.from_context(harness_context(tmp_path, private_dir))
    result = harness.run(make_turn(workspace, env, events))
    assert result.failure is FailureClass.STREAM and result.transport_failure
    assert "undecodable" in result.note and "exited 3" in result.note
    assert events.kinds() == ["agent_start"]


def test_a_cli_that_quits_before_its_stream_is_a_spawn_failure(
    workspace: Path, private_dir: Path, tmp_path: Path
) -> None:
    env = stand_in_cli(tmp_path, "echo 'error: unknown option --bogus' >&2\nexit 1\n")
    harness = ClaudeCodeHarness.from_context(harness_context(tmp_path, private_dir))
    result = harness.run(make_turn(workspace, env, Recorder()))
    assert result.failure is FailureClass.SPAWN and "unknown option --bogus" in result.note


def test_an_agent_error_result_is_an_agent_failure(
    workspace: Path, private_dir: Path, tmp_path: Path
) -> None:
    lines = [
        {"type": "system", "subtype": "init", "session_id": "s-2", "model": "m"},
        {
            "type": "result",
            "subtype": "error_max_turns",
            "is_error": True,
            "total_cost_usd": 0.5,
            "session_id": "s-2",
        },
    ]
    env = stand_in_cli(tmp_path, "".join(f"echo '{json.dumps(line)}'\n" for line in lines) + "exit 1\n")
    harness = ClaudeCodeHarness.from_context(harness_context(tmp_path, private_dir))
    result = harness.run(make_turn(workspace, env, Recorder()))
    assert result.failure is FailureClass.AGENT and not result.transport_failure
    assert result.cost_usd == pytest.approx(0.5) and "error_max_turns" in result.note


# -- session cursors ---------------------------------------------------------------------


def test_cursors_are_private_files_and_a_damaged_one_is_not_silently_replaced(tmp_path: Path) -> None:
    store = SessionStore.under(tmp_path / "private", "claude")
    store.save("solver", Cursor("c-123", 2, 0.25))
    path = store.path_of("solver")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert store.load("solver") == Cursor("c-123", 2, 0.25)
    assert store.load("critic") is None
    weird = store.path_of("../../etc/passwd")
    assert weird.parent == store.root and weird.name.startswith("session-")
    path.write_text("{not json")
    with pytest.raises(SessionStateError, match="delete it"):
        store.load("solver")


def test_cursor_values_are_masked_wherever_they_appear() -> None:
    value = {"text": "no conversation c-123 here", "list": ["c-123"], "c-123": 1, "n": 5}
    assert hide_cursors(value, {"c-123"}) == {
        "text": "no conversation [session cursor] here",
        "list": ["[session cursor]"],
        "[session cursor]": 1,
        "n": 5,
    }


# -- toolbox -------------------------------------------------------------------------------


def test_the_toolbox_is_laid_over_existing_skills_and_resets_edits(tmp_path: Path) -> None:
    toolbox = tmp_path / "toolbox"
    (toolbox / "bump").mkdir(parents=True)
    (toolbox / "bump" / "SKILL.md").write_text("frozen")
    workspace = tmp_path / "ws"
    own = workspace / ".claude" / "skills" / "own"
    own.mkdir(parents=True)
    (own / "SKILL.md").write_text("the project's own")
    install_toolbox(toolbox, workspace)
    copied = workspace / ".claude" / "skills" / "bump" / "SKILL.md"
    copied.write_text("edited by the agent")
    install_toolbox(toolbox, workspace)
    assert copied.read_text() == "frozen"
    assert (own / "SKILL.md").read_text() == "the project's own"


@pytest.mark.parametrize("plant", ["skills dir", "skill dir", "skill file", "hard link"])
def test_the_toolbox_never_writes_through_what_the_agent_planted(tmp_path: Path, plant: str) -> None:
    """`.claude/skills` outlives restores, so an earlier turn may have left links there: the next
    turn's copy replaces them and never writes outside the workspace."""
    toolbox = tmp_path / "toolbox"
    (toolbox / "s").mkdir(parents=True)
    (toolbox / "s" / "SKILL.md").write_text("frozen")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "SKILL.md").write_text("precious")
    skills = tmp_path / "ws" / ".claude" / "skills"
    skills.mkdir(parents=True)
    if plant == "skills dir":
        skills.rmdir()
        skills.symlink_to(outside)
    elif plant == "skill dir":
        (skills / "s").symlink_to(outside)
    else:
        (skills / "s").mkdir()
        if plant == "skill file":
            (skills / "s" / "SKILL.md").symlink_to(outside / "SKILL.md")
        else:
            os.link(outside / "SKILL.md", skills / "s" / "SKILL.md")
    install_toolbox(toolbox, tmp_path / "ws")
    assert (outside / "SKILL.md").read_text() == "precious" and sorted(os.listdir(outside)) == ["SKILL.md"]
    copied = skills / "s" / "SKILL.md"
    assert copied.read_text() == "frozen" and not copied.is_symlink() and os.lstat(copied).st_nlink == 1


@pytest.mark.parametrize("declared", [False, True])
def test_an_inherited_sandbox_claim_does_not_bypass_permissions_on_the_host(
    workspace: Path, private_dir: Path, tmp_path: Path, declared: bool
) -> None:
    """IS_SANDBOX=1 in the engine's own environment (a container crucible happens to run in) is not a
    statement about the turn: a host turn keeps acceptEdits unless the manifest's [agent].env says so."""
    record = tmp_path / "argv"
    env = stand_in_cli(tmp_path, f'printf "%s\\n" "$@" "IS_SANDBOX=$IS_SANDBOX" > {record}\nexit 1\n')
    env["IS_SANDBOX"] = "1"  # inherited
    agent = {"env": {"IS_SANDBOX": "1"}} if declared else {}
    harness = ClaudeCodeHarness.from_context(harness_context(tmp_path, private_dir, **agent))
    harness.run(make_turn(workspace, env, Recorder()))
    argv = record.read_text().splitlines()
    mode = argv[argv.index("--permission-mode") + 1] if "--permission-mode" in argv else None
    if declared:
        assert mode == "bypassPermissions" and "IS_SANDBOX=1" in argv
    else:
        assert mode != "bypassPermissions" and "IS_SANDBOX=" in argv
