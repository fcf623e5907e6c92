"""Permission mediation: what a permission request asks for, and the default-deny decision against the grant.

The grant is frozen when the run starts (the manifest's [agent.acp].allow); a request is
allowed only when its tool family is granted and every path it names lies inside the
workspace, and then only once (never "always": each later request is mediated again). Anything
else is denied. `decide` is pure; `path_problem` only looks at the file system.

This is cooperative policy, not a sandbox: an agent on the host that does its own work without
asking is bounded by the backend (an OpenShell sandbox), not by this module.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from crucible_harness_acp.settings import MCP_FAMILY, TOOL_KINDS

# ACP permission option kinds, in the order a decision prefers them.
ALLOW_ONCE = "allow_once"
REJECT_KINDS = ("reject_once", "reject_always")


@attrs.frozen
class ToolCallView:
    """What the client knows of one tool call: the request's fields over what its updates said before."""

    id: str
    title: str = ""
    kind: str | None = None
    locations: tuple[str, ...] = ()
    # Tool names found in the agent's vendor metadata (`_meta.<vendor>.toolName`), e.g. mcp__crucible__distress.
    names: tuple[str, ...] = ()

    def merged(self, update: Mapping[str, Any]) -> ToolCallView:
        """This view with the fields a tool_call / tool_call_update / permission request carries."""
        title = update.get("title")
        kind = update.get("kind")
        locations = update.get("locations")
        paths = (
            tuple(str(loc["path"]) for loc in locations if isinstance(loc, Mapping) and loc.get("path"))
            if isinstance(locations, list)
            else self.locations
        )
        return ToolCallView(
            self.id,
            title if isinstance(title, str) and title else self.title,
            kind if isinstance(kind, str) and kind else self.kind,
            paths,
            tuple(dict.fromkeys((*self.names, *_vendor_tool_names(update.get("_meta"))))),
        )


def _vendor_tool_names(meta: Any) -> list[str]:
    if not isinstance(meta, Mapping):
        return []
    found = []
    for vendor in meta.values():
        if isinstance(vendor, Mapping) and isinstance(vendor.get("toolName"), str):
            found.append(vendor["toolName"])
    return found


def _server_prefixes(servers: Iterable[str]) -> tuple[str, ...]:
    """How an agent names a server's tools: mcp__<server>__<tool>, with the server's name as the
    agent spells it (Claude Code turns characters other than letters, digits, _ and - into _)."""
    prefixes = []
    for server in servers:
        for spelled in {server, re.sub(r"[^A-Za-z0-9_-]", "_", server)}:
            prefixes.append(f"mcp__{spelled}__")
    return tuple(prefixes)


@attrs.frozen
class Grant:
    """What a turn's permission requests may be granted: frozen at run start, one per turn."""

    allow: frozenset[str]
    mcp_servers: tuple[str, ...] = ()  # the servers crucible handed this session

    def family(self, call: ToolCallView) -> str:
        """The tool family a call belongs to: its ACP kind, or "mcp" for a kind-less ("other") tool
        of crucible's servers. The kind comes first, so a command cannot pass as an MCP tool by
        its name."""
        if call.kind in TOOL_KINDS and call.kind != "other":
            return call.kind
        prefixes = _server_prefixes(self.mcp_servers)
        if prefixes and any(name.startswith(prefixes) for name in (call.title, *call.names)):
            return MCP_FAMILY
        return "other"

    def describe(self) -> str:
        granted = ", ".join(sorted(self.allow)) or "nothing"
        return f"default-deny; granted: {granted}"


@attrs.frozen
class Option:
    option_id: str
    kind: str


@attrs.frozen
class Decision:
    allowed: bool
    family: str
    reason: str
    option_id: str | None  # the option answered; None: answer "cancelled" (no reject option offered)


def decide(
    grant: Grant, call: ToolCallView, path_problems: Sequence[str], options: Sequence[Option]
) -> Decision:
    """The answer to one permission request. Default-deny: allowed only for a granted family,
    with no path outside the workspace, and only when the agent offers a one-time allowance."""
    family = grant.family(call)
    if family not in grant.allow:
        reason = f"tool family {family!r} is not granted by [agent.acp].allow"
    elif path_problems:
        reason = "; ".join(path_problems)
    else:
        once = next((o for o in options if o.kind == ALLOW_ONCE), None)
        if once is not None:
            return Decision(True, family, f"tool family {family!r} is granted", once.option_id)
        reason = "the agent offered no one-time allowance (an 'always' answer would skip later mediation)"
    reject = next((o for kind in REJECT_KINDS for o in options if o.kind == kind), None)
    return Decision(False, family, reason, reject.option_id if reject else None)


def inside(workspace: Path, path: str) -> bool:
    real = Path(os.path.realpath(workspace))
    target = Path(os.path.realpath(workspace / path))  # an absolute `path` replaces the workspace
    return target == real or real in target.parents


def path_problem(workspace: Path, path: str) -> str | None:
    """Why a path a tool call names is out of bounds (outside the workspace, or through a link
    out of it), or None. Links are resolved as the agent's own file access would resolve them."""
    lexical = os.path.normpath(os.path.join(workspace, path))
    root = os.path.normpath(workspace)
    if lexical != root and not lexical.startswith(root + os.sep):
        return f"{path} is outside the workspace"
    if not inside(workspace, path):
        return f"{path} leads out of the workspace through a link"
    return None
