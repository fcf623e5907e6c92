"""The opencode.json a turn runs with (given by OPENCODE_CONFIG), one template per API the endpoint may speak.

The endpoint is registered as provider `crucible` with the turn's model under it, so opencode
never consults its models catalogue; the key is read back from the environment
(`{env:OPENAI_API_KEY}`), never written. The turn's MCP servers (the broker among them) are
remote servers with their bearer in a header, which is why the file is 0600 and lives only as
long as the turn. Pure: rendering starts nothing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from crucible_harness_endpoint.endpoint import BASE_URL_SLOT, PROVIDER, Wire

# The AI SDK package opencode loads (bundled in its binary) for each API.
_PACKAGES = {
    Wire.CHAT: "@ai-sdk/openai-compatible",
    Wire.RESPONSES: "@ai-sdk/openai",
    Wire.ANTHROPIC: "@ai-sdk/anthropic",
}

# On the host the CLI may edit inside the workspace and run commands; what would reach beyond the
# workspace or the web is denied outright (the agent sees a refused tool call), because an
# unattended turn has nobody to ask. In a sandbox the box is the boundary.
HOST_PERMISSIONS = {"*": "allow", "external_directory": "deny", "webfetch": "deny", "websearch": "deny"}
SANDBOX_PERMISSIONS = {"*": "allow"}


def _remote_server(entry: Mapping[str, Any]) -> dict[str, Any] | None:
    """A turn's MCP server (`{"type": "http", "url", "headers"}`) as opencode's remote server, or None."""
    url = entry.get("url")
    if not isinstance(url, str) or entry.get("type", "http") not in ("http", "streamable-http", "sse"):
        return None
    server: dict[str, Any] = {"type": "remote", "url": url, "enabled": True, "oauth": False}
    headers = entry.get("headers")
    if isinstance(headers, Mapping):
        server["headers"] = {str(k): str(v) for k, v in headers.items()}
    return server


def render(wire: Wire, model: str, mcp_servers: Mapping[str, Any], *, confined: bool) -> str:
    """opencode.json for one API, its base URL left as the seed step's slot."""
    # The Anthropic SDK's base URL includes the API version; ANTHROPIC_BASE_URL, as the Claude
    # tools spell it, does not.
    base_url = f"{BASE_URL_SLOT}/v1" if wire is Wire.ANTHROPIC else BASE_URL_SLOT
    provider = {
        "npm": _PACKAGES[wire],
        "name": "crucible inference endpoint",
        "options": {"baseURL": base_url, "apiKey": f"{{env:{wire.key_variable}}}"},
        "models": {model: {"name": model}},
    }
    servers = {
        name: _remote_server(entry) for name, entry in mcp_servers.items() if isinstance(entry, Mapping)
    }
    config: dict[str, Any] = {
        "$schema": "https://opencode.ai/config.json",
        "model": f"{PROVIDER}/{model}",
        "small_model": f"{PROVIDER}/{model}",
        "enabled_providers": [PROVIDER],
        "provider": {PROVIDER: provider},
        "permission": SANDBOX_PERMISSIONS if confined else HOST_PERMISSIONS,
        "autoupdate": False,
        "share": "disabled",
    }
    if servers:
        config["mcp"] = {name: server for name, server in servers.items() if server is not None}
    return json.dumps(config, indent=1)
