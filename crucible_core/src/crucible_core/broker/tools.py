"""Broker tools: what a plugin registers through crucible_register_broker_tools, and what a call sees.

A tool is a name, a description the agent reads, a JSON Schema for its arguments and a
handler. The handler gets a ToolCall and returns a JSON object; it raises ToolError for a
refusal the agent should read (anything else it raises is reported as a tool failure, and the
broker goes on). A tool that writes outside the workspace names its output kind and asks
`call.admit(target)` before it writes: that is the mediation point counting the write.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs

from crucible_core.contract.records import value_methods
from crucible_core.errors import CrucibleError, ExitCode

TOOL_NAME = re.compile(r"[a-z][a-z0-9_]{0,47}")


class ToolError(CrucibleError):
    """A tool's refusal: its message goes back to the agent as the call's error."""

    exit_code = ExitCode.USAGE


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class BrokerTool:
    name: str
    description: str
    handler: Callable[[ToolCall], Mapping[str, Any]]
    input_schema: Mapping[str, Any] = attrs.field(factory=lambda: {"type": "object", "properties": {}})
    output_kind: str | None = None  # the output kind this tool writes, when it writes outside the run

    def __attrs_post_init__(self) -> None:
        if not TOOL_NAME.fullmatch(self.name):
            raise ValueError(
                f"broker tool name {self.name!r} must be lower_snake_case, at most 48 characters"
            )


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class BrokerRuntime:
    """What the engine gives the built-in tools: where the run's markers live, and its inbox."""

    workspace: Path
    distress_dir: Path
    pending_steers: Callable[[], list[str]] = list
    # Masks a value in everything the run writes from now on (a transport's bearer token).
    add_secret: Callable[[str], None] = lambda _value: None


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class ToolCall:
    tool: BrokerTool
    arguments: Mapping[str, Any]
    iteration: int
    runtime: BrokerRuntime
    _admit: Callable[..., str | None]

    def admit(self, target: str | None = None) -> str | None:
        """Ask the mediation point for one write of this tool's output kind; returns the address to use.

        Raises OutputRefused (the call then fails naming the bound) when the write is over its
        count or outside its target scope.
        """
        if self.tool.output_kind is None:
            raise ToolError(
                f"tool {self.tool.name} declares no output kind, so it may not write outside the run"
            )
        return self._admit(
            self.tool.output_kind, target, by=f"tool {self.tool.name}", iteration=self.iteration
        )

    def text(self, key: str, *, required: bool = True, limit: int = 4000) -> str:
        """A string argument, bounded; a missing required one is the agent's mistake, said plainly."""
        value = self.arguments.get(key)
        if value is None and not required:
            return ""
        if not isinstance(value, str) or (required and not value.strip()):
            raise ToolError(f"argument {key!r} must be a non-empty string")
        return value[:limit]

    def texts(self, key: str, *, limit: int = 20) -> tuple[str, ...]:
        value = self.arguments.get(key) or []
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ToolError(f"argument {key!r} must be a list of strings")
        return tuple(v[:4000] for v in value[:limit])
