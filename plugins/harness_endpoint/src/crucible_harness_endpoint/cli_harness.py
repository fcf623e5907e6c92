"""What the opencode and pi harnesses do alike around their command: checks, the host turn, sandbox reach.

Each describes every turn as one command (`SandboxHarness.sandbox_command`); a subclass says
only how (`command`). A sandbox or a pod runs that command as it is; `run` carries it out on this
host (host_turn.py), with the toolbox copied where the CLI looks for skills before either.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar

from crucible_core.api import (
    EgressReach,
    FailureClass,
    ManifestError,
    SandboxCommand,
    SandboxLayout,
    Turn,
    TurnResult,
)
from crucible_harness_endpoint.cli_lookup import AgentCli
from crucible_harness_endpoint.endpoint import sandbox_reach
from crucible_harness_endpoint.host_turn import preflight_problems, run_on_host
from crucible_harness_endpoint.toolbox import ToolboxError, install_toolbox


def refuse_session(harness: str, session: str | None) -> None:
    """Neither CLI continues a conversation across turns: a logical session is refused at start,
    never quietly run as fresh turns under its name."""
    if session:
        raise ManifestError(
            f'harness "{harness}" cannot continue [agent].session = "{session}" across turns',
            hint='use harness = "claude" for a logical session, or remove [agent].session',
        )


class EndpointCliHarness:
    cli: ClassVar[AgentCli]
    skills_dir: ClassVar[str]  # where the CLI looks for the workspace's skills
    sandbox_binaries: ClassVar[tuple[str, ...]]  # the programs that open its connections
    toolbox: Path | None  # the manifest's toolbox_dir, resolved
    agent_env: Mapping[str, str]  # [agent].env: what a sandbox's turn is handed (its endpoint)

    def command(self, turn: Turn, layout: SandboxLayout, program: str, *, confined: bool) -> SandboxCommand:
        """The turn as one command running `program`; `confined`: a sandbox or pod is the boundary."""
        raise NotImplementedError

    def preflight(self, env: Mapping[str, str]) -> list[str]:
        return preflight_problems(self.cli, env)

    def run(self, turn: Turn) -> TurnResult:
        describe = functools.partial(self._describe, confined=False)
        return run_on_host(self.cli, describe, turn, prefix=f"crucible-{self.cli.name}-")

    def sandbox_command(self, turn: Turn, layout: SandboxLayout) -> SandboxCommand | TurnResult:
        return self._describe(turn, layout, self.cli.in_sandbox(turn.env), confined=True)

    def sandbox_egress(self) -> EgressReach:
        """What a confining sandbox (openshell) must let this harness's turns reach: the endpoint
        [agent].env names (and api.openai.com), and the CLI's programs."""
        return sandbox_reach(self.agent_env, self.sandbox_binaries)

    def _describe(
        self, turn: Turn, layout: SandboxLayout, program: str, *, confined: bool
    ) -> SandboxCommand | TurnResult:
        if self.toolbox is not None:
            try:
                install_toolbox(self.toolbox, turn.workspace, self.skills_dir)
            except ToolboxError as exc:
                return TurnResult(False, FailureClass.SPAWN, note=str(exc))
        return self.command(turn, layout, program, confined=confined)
