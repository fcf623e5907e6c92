"""crucible-plugin-distress: the agent's ways to ask for a human during a run.

`crucible distress` pages a human: severity error suspends the run at its next iteration head
until the marker is deleted or an operator approves; warn and info leave a note on the next row
(pages.py). `crucible escalate` writes ESCALATION.json: after the turn the run restores its last
kept state and ends escalated, exit 2 (escalation.py). Both are also broker tools (tools.py), and
the loop reads what the agent left through `crucible_agent_signals` (signals.py). Only the
registration lives here, so `crucible plugins` loads none of it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from crucible_core.api import hookimpl

if TYPE_CHECKING:  # type-only: naming them here loads nothing of core when plugins are listed
    import click

    from crucible_core.api import AgentSignals, BrokerTool, Register

TOOL_NAMES = ("distress", "escalate")


@hookimpl
def crucible_agent_signals() -> AgentSignals:
    from crucible_distress.signals import DistressSignals

    return DistressSignals()


@hookimpl
def crucible_register_commands(register: Register[click.Command]) -> None:
    from crucible_core.api import Deferred

    register("distress", Deferred("crucible_distress.cli:distress_command"))
    register("escalate", Deferred("crucible_distress.cli:escalate_command"))


@hookimpl
def crucible_register_broker_tools(register: Register[BrokerTool]) -> None:
    from crucible_core.api import Deferred

    # Deferred: BrokerTool is an attrs class, and listing plugins must build none (issue 27)
    for name in TOOL_NAMES:
        register(name, Deferred(_tool_named(name)))


def _tool_named(name: str) -> Callable[[], BrokerTool]:
    def build() -> BrokerTool:
        from crucible_distress.tools import TOOLS

        return next(tool for tool in TOOLS if tool.name == name)

    return build
