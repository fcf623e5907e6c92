"""The `pi` harness: one turn of `pi --mode json --print`, as one command wherever it runs.

The command is a small `sh` script that seeds models.json from the turn's environment (the
shared seed step) and then runs pi with the prompt on stdin, passing its stream on without the
partial-message lines; on the host `run` carries it out with a home of its own
(crucible_harness_endpoint.host_turn). Pi runs `--offline` (no update
check, no package checks, no install telemetry) under a PI_CODING_AGENT_DIR of the turn's own.

Pi has no MCP client: a run that grants the broker's tools is refused when the harness is built,
before anything starts, rather than running an agent that cannot reach them.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from pathlib import Path

import attrs

from crucible_core.api import HarnessContext, ManifestError, SandboxCommand, SandboxLayout, Turn
from crucible_harness_endpoint.cli_harness import EndpointCliHarness, refuse_session
from crucible_harness_endpoint.cli_lookup import PROGRAM_STEP, AgentCli
from crucible_harness_endpoint.endpoint import (
    PROVIDER,
    resolve_model,
    seed_step,
    template_files,
)
from crucible_harness_endpoint.toolbox import resolve_toolbox
from crucible_harness_endpoint.turn_env import turn_env
from crucible_harness_pi import config
from crucible_harness_pi.settings import SKILLS_DIR, PiSettings
from crucible_harness_pi.stream import HARNESS, PiStream
from crucible_harness_pi.verdict import classify

CLI = AgentCli("pi", "CRUCIBLE_PI_BIN", "npm install -g @mariozechner/pi-coding-agent")

QUIET_DEFAULTS: Mapping[str, str] = {"PI_OFFLINE": "1", "PI_SKIP_VERSION_CHECK": "1", "PI_TELEMETRY": "0"}
# pi is a node script: the process that opens the socket is node (OpenShell matches the
# kernel-resolved binary), so the allowlist carries node beside pi.
SANDBOX_BINARIES = ("/usr/local/bin/pi", "/usr/bin/node", "/usr/local/bin/node")

# [agent].effort as pi's --thinking level: pi's ceiling is xhigh.
THINKING = {"low": "low", "medium": "medium", "high": "high", "xhigh": "xhigh", "max": "xhigh"}


def wrapper(layout: SandboxLayout, model: str) -> str:
    """The turn's `sh` script: argv `$1` is the CLI, the rest pi's arguments."""
    return f"""\
{PROGRAM_STEP}{seed_step(f"{agent_dir(layout)}/models.json", layout.private, model)}
# Each message_update line repeats the whole message so far: left in, a long turn's output
# would grow quadratically past what a pod's log carries back. message_end repeats it once.
crucible_status_file={shlex.quote(layout.private)}/pi.status
{{ "$crucible_cli" "$@"; printf '%s\\n' "$?" > "$crucible_status_file"; }} |
  awk 'index($0, "{{\\"type\\":\\"message_update\\"") != 1 {{ print; fflush() }}'
crucible_status=$(cat "$crucible_status_file" 2>/dev/null) || crucible_status=1
exit "$crucible_status"
"""


def agent_dir(layout: SandboxLayout) -> str:
    return f"{layout.home}/.pi/agent"


def grants_broker_tools(ctx: HarnessContext) -> bool:
    """Whether the manifest grants the broker's tools: unset `tools` grants every installed one."""
    broker = ctx.agent.broker
    return broker.enabled is not False and (broker.tools is None or bool(broker.tools))


@attrs.frozen
class PiHarness(EndpointCliHarness):
    cli = CLI
    skills_dir = SKILLS_DIR
    sandbox_binaries = SANDBOX_BINARIES
    model: str
    thinking: str | None = None
    toolbox: Path | None = None
    agent_env: Mapping[str, str] = attrs.field(factory=dict)

    @classmethod
    def from_context(cls, ctx: HarnessContext) -> PiHarness:
        settings = ctx.settings if isinstance(ctx.settings, PiSettings) else PiSettings()
        refuse_session(HARNESS, ctx.agent.session)
        if grants_broker_tools(ctx):
            raise ManifestError(
                "harness pi has no MCP client, so it cannot call the broker tools this run grants",
                hint="set [agent.broker] enabled = false (or tools = []), or use harness opencode",
            )
        effort = ctx.agent.effort
        if effort is not None and effort not in THINKING:
            raise ManifestError(
                f"[agent].effort = {effort!r} is not one of {', '.join(THINKING)}",
                hint="pi takes it as --thinking (max becomes xhigh)",
            )
        model = resolve_model(settings.pi.model, ctx.agent.model, HARNESS)
        thinking = THINKING[effort] if effort is not None else None
        return cls(
            model, thinking, resolve_toolbox(settings.toolbox_dir, ctx.manifest_dir), dict(ctx.agent.env)
        )

    def command(self, turn: Turn, layout: SandboxLayout, program: str, *, confined: bool) -> SandboxCommand:
        """The same command wherever it runs: pi asks no permission questions."""
        reasoning = self.thinking is not None
        files = template_files(
            layout.private, lambda wire: config.render_models(wire, self.model, reasoning=reasoning)
        )
        files[f"{agent_dir(layout)}/settings.json"] = config.render_settings().encode("utf-8")
        env = turn_env(turn.env, layout.home, QUIET_DEFAULTS, PI_CODING_AGENT_DIR=agent_dir(layout))
        argv = ["sh", "-c", wrapper(layout, self.model), "crucible-pi", program]
        argv += ["--mode", "json", "--print", "--offline", "--provider", PROVIDER, "--model", self.model]
        if self.thinking is not None:
            argv += ["--thinking", self.thinking]
        stream = PiStream(turn.emit, self.model)
        return SandboxCommand(
            argv=tuple(argv),
            env=env,
            stdin=turn.prompt.encode("utf-8"),
            on_stdout_line=stream.feed,
            finish=lambda done: classify(done, stream),
            files=files,
        )
