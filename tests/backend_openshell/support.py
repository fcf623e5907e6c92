"""Helpers for the openshell backend tests: settings for the test gateway, a scripted sandbox harness, turns."""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from crucible_backend_openshell.backend import OpenShellBackend
from crucible_backend_openshell.settings import OpenShellSettings, OpenShellTable
from crucible_core.process import Completed
from crucible_core.protocols import FailureClass, SandboxCommand, SandboxLayout, Turn, TurnResult
from tests.backend_openshell.fake_gateway import FakeGateway

IMAGE = "ghcr.io/crucible/test-sandbox:1"


def sandbox_path(*extra: Path | None) -> str:
    """PATH inside the test sandboxes, as if the image had python3, node and the CLI baked in."""
    dirs = [str(p) for p in extra if p is not None]
    for program in ("python3", "node", "tar", "sh"):
        found = shutil.which(program)
        if found:
            dirs.append(str(Path(found).parent))
    dirs.append(str(Path(sys.executable).parent))
    return ":".join(dict.fromkeys([*dirs, "/usr/local/bin", "/usr/bin", "/bin"]))


def settings(gateway: FakeGateway, **table: Any) -> OpenShellSettings:
    return OpenShellSettings(IMAGE, OpenShellTable(gateway=gateway.address, **table))


# The scripted agent: raises the integer in value.txt, prints two stream lines, and, when the
# turn has MCP servers, calls each with and without its Authorization header.
AGENT = r"""
import json, os, pathlib, sys, urllib.request, urllib.error
value = pathlib.Path("value.txt")
value.write_text(str(int(value.read_text()) + 1) + "\n")
print(json.dumps({"event": "edited", "value": value.read_text().strip()}), flush=True)
config = pathlib.Path(os.environ["HOME"]) / ".crucible" / "mcp.json"
if config.exists():
    results = {"mode": oct(config.stat().st_mode & 0o777)}
    for name, server in json.loads(config.read_text())["mcpServers"].items():
        for label, headers in (("without", {}), ("with", server["headers"])):
            request = urllib.request.Request(server["url"], headers=headers)
            try:
                with urllib.request.urlopen(request, timeout=10) as reply:
                    results[f"{name} {label}"] = [reply.status, reply.read().decode()]
            except urllib.error.HTTPError as exc:
                results[f"{name} {label}"] = [exc.code, ""]
    pathlib.Path("service-results.json").write_text(json.dumps(results))
store = pathlib.Path(os.environ["HOME"]) / ".claude" / "projects" / "transcript.jsonl"
if store.exists():  # a session restored into this fresh sandbox
    pathlib.Path("restored.json").write_text(json.dumps([store.read_text(), oct(store.stat().st_mode & 0o777)]))
store.parent.mkdir(parents=True, exist_ok=True)
store.write_text(f"turn {os.environ.get('CRUCIBLE_ITERATION')}\n")
env = {k: os.environ.get(k) for k in ("IS_SANDBOX", "PROVIDED_KEY", "CRUCIBLE_ITERATION")}
pathlib.Path("seen-env.json").write_text(json.dumps(env))
print(json.dumps({"event": "done"}), flush=True)
sys.exit(int(os.environ.get("AGENT_EXIT", "0")))
"""


@attrs.define
class ScriptedHarness:
    """A SandboxHarness whose program is AGENT under python3; records the lines it streamed."""

    lines: list[str] = attrs.field(factory=list)
    commands: list[SandboxCommand] = attrs.field(factory=list)

    def sandbox_command(self, turn: Turn, layout: SandboxLayout) -> SandboxCommand:
        env = {**turn.env, "IS_SANDBOX": "1", "HOME": layout.home}
        files = {}
        if turn.mcp_servers:
            files[f"{layout.private}/mcp.json"] = json.dumps({"mcpServers": dict(turn.mcp_servers)}).encode()

        def finish(done: Completed) -> TurnResult:
            if done.timed_out:
                return TurnResult(False, FailureClass.TIMEOUT, note="timed out")
            if done.exit_code != 0:
                return TurnResult(False, FailureClass.AGENT, note=f"agent exited {done.exit_code}")
            return TurnResult(True, note="agent finished")

        command = SandboxCommand(
            argv=("python3", "-c", AGENT),
            env=env,
            stdin=turn.prompt.encode(),
            on_stdout_line=self.lines.append,
            finish=finish,
            files=files,
            session_dirs=(f"{layout.home}/.claude/projects",) if turn.session else (),
        )
        self.commands.append(command)
        return command


def make_backend(
    settings: OpenShellSettings,
    harness: Any,
    workspace: Path,
    private_dir: Path,
    *,
    disclosed: Mapping[str, str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> OpenShellBackend:
    return OpenShellBackend(
        settings,
        harness,
        dict(disclosed or {}),
        workspace,
        private_dir,
        ("RESULTS.md",),
        dict(environ or {}),
    )


def make_turn(
    workspace: Path,
    env: Mapping[str, str],
    *,
    iteration: int = 1,
    deadline: float | None = 60,
    session: str | None = None,
) -> Turn:
    events: list[tuple[str, Any]] = []
    return Turn(
        iteration=iteration,
        prompt="Raise the number in value.txt.",
        workspace=workspace,
        env=dict(env),
        deadline_seconds=deadline,
        emit=lambda kind, fields: events.append((kind, fields)),
        session=session,
    )
