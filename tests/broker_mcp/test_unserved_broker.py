"""A run whose agent can call no broker tool gets a broker that loads the mediation point only when
the engine first asks to write, and answers as the full broker would meanwhile."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import crucible_broker_mcp
from crucible_broker_mcp.broker import Broker
from crucible_broker_mcp.tools import BUILTIN_TOOLS
from crucible_core.broker.declaration import Declaration, Disclosure
from crucible_core.broker.outputs import OutputRefused, ResolvedOutput
from crucible_core.broker.service import BrokerRequest, TurnBroker
from crucible_core.broker.tools import BrokerRuntime
from crucible_core.contract import wire

TOOLS = {tool.name: tool for tool in BUILTIN_TOOLS}
# One gpu capture (no target) may be written by the run.
OUTPUTS = (ResolvedOutput("gpu-capture", 1, None, "manifest", False),)
HARNESS_TAKES_NONE = "harness command takes no MCP servers"


def request(
    tmp_path: Path,
    events: list[Any],
    *,
    granted: tuple[str, ...] = (),
    unreachable: str | None = None,
    resumed: bool = False,
) -> BrokerRequest:
    declaration = Declaration(OUTPUTS, Disclosure((), (), None, (), granted))
    runtime = BrokerRuntime(tmp_path, tmp_path / "distress")
    log = tmp_path / "session.jsonl"
    return BrokerRequest(declaration, TOOLS, runtime, events.append, {}, log, resumed, unreachable)


@pytest.mark.parametrize(
    ("granted", "unreachable"),
    [((), None), (("steer_inbox",), HARNESS_TAKES_NONE), ((), HARNESS_TAKES_NONE)],
)
def test_a_run_whose_agent_can_call_no_tool_gets_the_unserved_broker_saying_what_the_full_one_says(
    tmp_path: Path, granted: tuple[str, ...], unreachable: str | None
) -> None:
    events: list[Any] = []
    asked = request(tmp_path, events, granted=granted, unreachable=unreachable)
    broker = crucible_broker_mcp.crucible_open_broker(asked)
    assert isinstance(broker, crucible_broker_mcp.UnservedBroker) and isinstance(broker, TurnBroker)
    assert broker.prompt_text() == Broker.open(asked).prompt_text()
    broker.open_turn(1)
    broker.close_turn()
    assert broker.opened is None and events == []  # a turn opens nothing


def test_a_run_whose_agent_can_call_its_tools_gets_the_full_broker(tmp_path: Path) -> None:
    broker = crucible_broker_mcp.crucible_open_broker(request(tmp_path, [], granted=("steer_inbox",)))
    assert isinstance(broker, Broker) and list(broker.tools) == ["steer_inbox"]


def test_the_first_write_opens_the_mediation_point_which_counts_and_refuses_as_ever(tmp_path: Path) -> None:
    events: list[Any] = []
    broker = crucible_broker_mcp.crucible_open_broker(request(tmp_path, events))
    assert isinstance(broker, crucible_broker_mcp.UnservedBroker)
    assert broker.admit("gpu-capture", by="engine", iteration=2) is None
    assert isinstance(broker.opened, Broker)
    with pytest.raises(OutputRefused):
        broker.admit("gpu-capture", by="engine", iteration=3)  # its one write is spent
    assert [type(e).__name__ for e in events] == ["OutputAdmitted", "OutputRefused"]


def test_a_resumed_run_reads_what_its_log_already_spent_when_it_opens(tmp_path: Path) -> None:
    spent = wire.OutputAdmitted(output_kind="gpu-capture", tool="engine", used=1, count=1)
    (tmp_path / "session.jsonl").write_text(wire.encode(spent) + "\n")
    events: list[Any] = []
    broker = crucible_broker_mcp.crucible_open_broker(request(tmp_path, events, resumed=True))
    assert isinstance(broker, crucible_broker_mcp.UnservedBroker) and broker.opened is not None
    (tmp_path / "session.jsonl").write_text("")  # read when opened, not at the first write
    with pytest.raises(OutputRefused):
        broker.admit("gpu-capture", by="engine")


def test_opening_the_unserved_broker_loads_no_broker_module(tmp_path: Path) -> None:
    code = textwrap.dedent(
        """        import sys
        from pathlib import Path
        import crucible_broker_mcp
        from crucible_core.broker.declaration import Declaration, Disclosure
        from crucible_core.broker.service import BrokerRequest
        from crucible_core.broker.tools import BrokerRuntime
        declaration = Declaration((), Disclosure((), (), None, (), ()))
        runtime = BrokerRuntime(Path("."), Path("."))
        request = BrokerRequest(declaration, {}, runtime, print, {}, Path("log"), False, None)
        broker = crucible_broker_mcp.crucible_open_broker(request)
        broker.open_turn(1)
        broker.prompt_text()
        broker.close_turn()
        print(sorted(m for m in sys.modules if m.startswith("crucible_broker_mcp.")))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "[]"
