"""The `local` backend's turn written out for a pod (pod_turn.py): run under a real sh, the
harness's files, variables and argv arrive intact however hostile their text, and nothing of
this machine's environment is in the command."""

from __future__ import annotations

import types
from pathlib import Path
from typing import Any

import attrs

from crucible_backend_local.backends import LocalBackend, SendableLocalBackend
from crucible_backend_local.pod_turn import POD_LAYOUT
from crucible_core import process
from crucible_core.protocols import (
    FailureClass,
    SandboxCommand,
    SandboxLayout,
    ShellTurnBackend,
    Turn,
    TurnResult,
)
from crucible_harness_claude.cli_harness import ClaudeCodeHarness
from tests.harness_claude.support import Recorder, harness_context, make_turn

HOSTILE = 'it\'s $(touch pwned) `id` "quoted" \\ end'
# The stand-in program: prints where it runs, its layout variables, its file and its stdin.
PROGRAM = (
    'printf "pwd=%s\\n" "$(pwd)"; printf "home=%s\\n" "$HOME"; printf "odd=%s\\n" "$ODD"; '
    'printf "file=%s\\n" "$(cat "$CFG")"; printf "mode=%s\\n" "$(stat -c %a "$CFG")"; '
    'printf "stdin=%s\\n" "$(cat)"; printf "arg=%s\\n" "$1"'
)


@attrs.define
class ScriptedHarness:
    """A SandboxHarness whose command is a small sh program; records what finish saw."""

    files: dict[str, bytes]
    program: str = "sh"
    lines: list[str] = attrs.field(factory=list)
    finished: list[process.Completed] = attrs.field(factory=list)
    asked: list[Turn] = attrs.field(factory=list)

    def run(self, turn: Turn) -> TurnResult:
        raise AssertionError("the pod turn never runs the harness here")

    def sandbox_command(self, turn: Turn, layout: SandboxLayout) -> SandboxCommand:
        self.asked.append(turn)

        def finish(done: Any) -> TurnResult:
            self.finished.append(done)
            return TurnResult(True, note=f"{len(self.lines)} lines")

        return SandboxCommand(
            argv=(self.program, "-c", PROGRAM, "sh", HOSTILE),
            env={"HOME": layout.home, "CFG": f"{layout.private}/{HOSTILE}.json", "ODD": HOSTILE},
            stdin=b"the prompt",
            on_stdout_line=self.lines.append,
            finish=finish,
            files=self.files,
        )


def test_the_pod_command_writes_the_files_sets_the_variables_and_runs_the_argv(tmp_path: Path) -> None:
    work, tmp = tmp_path / "work", tmp_path / "tmp"
    work.mkdir()
    tmp.mkdir()
    harness = ScriptedHarness({f"{POD_LAYOUT.private}/{HOSTILE}.json": b"config \x00 bytes"})
    turn = make_turn(work, {"SECRET_HERE": "local-only-41c2", "CRUCIBLE_WORKSPACE": str(work)}, Recorder())
    shell_turn = SendableLocalBackend(harness).shell_turn(turn)
    assert "local-only-41c2" not in shell_turn.command and str(work) not in shell_turn.command
    assert shell_turn.env == turn.env  # the runner picks the names it forwards
    assert harness.asked[0].env == {"CRUCIBLE_WORKSPACE": POD_LAYOUT.workdir}

    done = process.run(
        ["sh", "-c", shell_turn.command],
        cwd=work,
        env={"PATH": "/usr/bin:/bin", "TMPDIR": str(tmp)},
        timeout=30,
        stdin_data=shell_turn.stdin,
    )
    assert done.exit_code == 0, done.stderr
    result = shell_turn.finish(done)
    out = dict(line.split("=", 1) for line in harness.lines)
    assert out["pwd"] == str(work)
    assert out["home"].startswith(str(tmp) + "/crucible-turn.") and out["home"].endswith("/home")
    assert out["odd"] == HOSTILE and out["arg"] == HOSTILE
    assert out["file"] == "config \x00 bytes".replace("\x00", "")  # $(cat) drops the NUL; the rest arrived
    assert out["mode"] == "600" and out["stdin"] == "the prompt"
    assert result.ok and result.note == "7 lines" and harness.finished == [done]  # lines first, then finish
    assert not (work / "pwned").exists() and not list(tmp.iterdir())  # nothing ran; the turn dir is gone


def test_a_missing_program_fails_the_turn_saying_so(tmp_path: Path) -> None:
    harness = ScriptedHarness({}, program="no-such-agent-cli")
    command = SendableLocalBackend(harness).shell_turn(make_turn(tmp_path, {}, Recorder())).command
    done = process.run(["sh", "-c", command], cwd=tmp_path, env={"PATH": "/usr/bin:/bin"}, timeout=30)
    assert done.exit_code == 127 and "no-such-agent-cli is not on the PATH of this pod" in done.stderr


def test_a_file_outside_the_pods_home_is_refused_before_any_job(tmp_path: Path) -> None:
    harness = ScriptedHarness({"/etc/profile.d/agent.sh": b"x", f"{POD_LAYOUT.home}/../escape": b"y"})
    shell_turn = SendableLocalBackend(harness).shell_turn(make_turn(tmp_path, {}, Recorder()))
    result = shell_turn.finish(process.Completed(1, "", "", False, 0.0))
    assert not result.ok and result.failure is FailureClass.SPAWN
    assert "/etc/profile.d/agent.sh" in result.note and "escape" in result.note
    assert "base64" not in shell_turn.command and shell_turn.command.endswith("exit 1")


def test_the_claude_harness_command_carries_no_local_secret_path_or_mcp_server(tmp_path: Path) -> None:
    harness = ClaudeCodeHarness.from_context(harness_context(tmp_path, tmp_path / "private"))
    env = {
        "ANTHROPIC_API_KEY": "sk-ant-local-key-9d1e",
        "CRUCIBLE_CLAUDE_BIN": "/opt/local/bin/claude",
        "PATH": "/opt/local/bin:/usr/bin",
        "CRUCIBLE_WORKSPACE": str(tmp_path),
    }
    servers = {
        "broker": {
            "type": "http",
            "url": "http://127.0.0.1:5/mcp",
            "headers": {"Authorization": "Bearer b-7"},
        }
    }
    turn = make_turn(tmp_path, env, Recorder(), mcp_servers=servers)
    command = SendableLocalBackend(harness).shell_turn(turn).command
    for local in ("sk-ant-local-key-9d1e", "/opt/local", "127.0.0.1", "Bearer", str(tmp_path)):
        assert local not in command
    assert "'claude' '--print'" in command and "export IS_SANDBOX='1'" in command
    assert "--mcp-config" not in command


def test_only_a_harness_that_describes_its_turn_as_a_command_makes_the_local_backend_sendable(
    tmp_path: Path,
) -> None:
    def context(harness: object) -> Any:
        return types.SimpleNamespace(resolve_harness=lambda name: harness, harness_name="h")

    class HostOnly:
        def run(self, turn: Turn) -> TurnResult:
            return TurnResult(True)

    plain = LocalBackend.from_context(context(HostOnly()))
    sendable = LocalBackend.from_context(context(ScriptedHarness({})))
    assert not isinstance(plain, ShellTurnBackend)
    assert isinstance(sendable, ShellTurnBackend) and isinstance(sendable, LocalBackend)
