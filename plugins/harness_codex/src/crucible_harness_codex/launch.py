"""How the Codex CLI is found and started: its binary, its argv, its environment, its config.toml.

Everything here is pure (no process is started, no file written), so the decisions are
testable on their own.

The unattended posture: `codex exec --json` with approvals never asked and Codex's own
sandbox off (`--dangerously-bypass-approvals-and-sandbox`). On the host the `local` backend
promises no confinement (as for every harness there); in a sandboxing backend the box is the
boundary. The CLI's own reach beyond the model is switched off in the config it is given:
analytics, feedback, update checks, plugins and their remote catalogue, and apps (connectors).
"""

from __future__ import annotations

import json
import os
import shutil
import urllib.parse
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePath
from typing import Any

import attrs

CLI_BIN_ENV = "CRUCIBLE_CODEX_BIN"
CLI_NAME = "codex"
INSTALL_HINT = (
    f"install it with `npm install -g @openai/codex`, or set {CLI_BIN_ENV} to the path of its `codex` binary"
)
# The custom provider a turn's endpoint is registered under when OPENAI_BASE_URL names one.
PROVIDER_ID = "crucible"
BASE_URL_ENV = "OPENAI_BASE_URL"

# Codex's effort tiers; crucible's `max` is Codex's highest.
_EFFORTS = {
    "minimal": "minimal",
    "low": "low",
    "medium": "medium",
    "high": "high",
    "xhigh": "xhigh",
    "max": "xhigh",
}

# What the CLI does on its own beyond talking to the model, all off.
QUIET_CONFIG: Mapping[str, Any] = {
    "check_for_update_on_startup": False,
    "analytics": {"enabled": False},
    "feedback": {"enabled": False},
    "history": {"persistence": "none"},
    "features": {"plugins": False, "remote_plugin": False, "apps": False, "tool_suggest": False},
}


@attrs.frozen
class CliLookup:
    path: Path | None
    looked_for: str  # what was searched, for the error message

    def missing_note(self) -> str:
        return f"the Codex CLI was not found ({self.looked_for}); {INSTALL_HINT}"


def find_cli(env: Mapping[str, str]) -> CliLookup:
    """The turn's CRUCIBLE_CODEX_BIN, else the engine's, else `codex` on the turn's PATH."""
    configured = env.get(CLI_BIN_ENV) or os.environ.get(CLI_BIN_ENV)
    search_path = env.get("PATH", os.defpath)
    if configured:
        if os.sep not in configured:
            found = shutil.which(configured, path=search_path)
            return CliLookup(Path(found) if found else None, f"{CLI_BIN_ENV}={configured} on PATH")
        path = Path(configured).expanduser()
        usable = path.is_file() and os.access(path, os.X_OK)
        return CliLookup(path if usable else None, f"{CLI_BIN_ENV}={configured}")
    found = shutil.which(CLI_NAME, path=search_path)
    return CliLookup(Path(found) if found else None, f"`{CLI_NAME}` on PATH")


def reasoning_effort(effort: str | None) -> str | None:
    if not effort:
        return None
    return _EFFORTS.get(effort.lower(), effort.lower())


def build_argv(cli: PurePath | str, *, model: str, effort: str | None) -> list[str]:
    """The CLI's argv. The prompt is not in it: `-` reads it from stdin, out of `ps` and argv limits."""
    argv = [str(cli), "exec", "--json", "--dangerously-bypass-approvals-and-sandbox"]
    argv += ["--skip-git-repo-check", "--color", "never", "-m", model]
    tier = reasoning_effort(effort)
    if tier:
        argv += ["-c", f"model_reasoning_effort={json.dumps(tier)}"]
    argv.append("-")
    return argv


def home_env(home: str) -> dict[str, str]:
    """A turn's own home: config, caches and state of everything the agent runs land under it."""
    return {
        "HOME": home,
        "CODEX_HOME": f"{home}/.codex",
        "XDG_CONFIG_HOME": f"{home}/.config",
        "XDG_CACHE_HOME": f"{home}/.cache",
        "XDG_DATA_HOME": f"{home}/.local/share",
        "XDG_STATE_HOME": f"{home}/.local/state",
    }


def _is_credential(name: str) -> bool:
    return name.startswith(("OPENAI_API_KEY", "OPENAI_ADMIN_KEY", "CODEX_"))


def child_env(turn_env: Mapping[str, str], home: str) -> dict[str, str]:
    """The CLI's environment: the turn's, minus every OpenAI key and Codex variable, with its own home.

    The selected credential reaches the CLI only through the auth file (or, in a pod, the one
    variable its provider entry names), so neither it nor any other key is exported to the
    commands the agent runs; an inherited CODEX_* (a parent Codex session's) would steer this one.
    """
    env = {k: v for k, v in turn_env.items() if not _is_credential(k)}
    env.update(home_env(home))
    return env


def endpoint_host(base_url: str) -> tuple[str, int] | None:
    """The host and port a custom endpoint's base URL names (None: no URL, or not http(s))."""
    parts = urllib.parse.urlsplit(base_url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    try:
        port = parts.port
    except ValueError:
        return None
    return parts.hostname, port or (443 if parts.scheme == "https" else 80)


@attrs.frozen
class Endpoint:
    """Where the model is: OpenAI's own (base_url None), or a Responses API at base_url."""

    base_url: str | None = None
    # The variable the CLI reads the key from (a pod's own env); None: from the auth file.
    env_key: str | None = None


def config(
    *, model: str, endpoint: Endpoint, mcp_servers: Mapping[str, Any], effort: str | None = None
) -> dict[str, Any]:
    """The turn's config.toml as a mapping: the posture, the endpoint, the turn's MCP servers."""
    data: dict[str, Any] = {
        "model": model,
        "approval_policy": "never",
        "sandbox_mode": "danger-full-access",
    }
    tier = reasoning_effort(effort)
    if tier:
        data["model_reasoning_effort"] = tier
    data.update(QUIET_CONFIG)
    if endpoint.base_url is not None or endpoint.env_key is not None:
        provider: dict[str, Any] = {
            "name": "crucible endpoint",
            "base_url": endpoint.base_url or "https://api.openai.com/v1",
            "wire_api": "responses",
        }
        if endpoint.env_key is not None:
            provider["env_key"] = endpoint.env_key
        else:
            provider["requires_openai_auth"] = True  # the key or the ChatGPT token of the auth file
        data["model_provider"] = PROVIDER_ID
        data["model_providers"] = {PROVIDER_ID: provider}
    servers = mcp_table(mcp_servers)
    if servers:
        data["mcp_servers"] = servers
    return data


def mcp_table(servers: Mapping[str, Any]) -> dict[str, Any]:
    """The turn's MCP servers (streamable HTTP, a bearer header) in Codex's [mcp_servers] shape.

    Codex has no inline bearer setting; the header rides `http_headers`, so the token stays in
    the 0600 config file rather than in any environment. An entry of another shape is skipped.
    """
    table: dict[str, Any] = {}
    for name, server in servers.items():
        if not isinstance(server, Mapping) or not isinstance(server.get("url"), str):
            continue
        entry: dict[str, Any] = {"url": server["url"]}
        headers = server.get("headers")
        if isinstance(headers, Mapping) and headers:
            entry["http_headers"] = {str(k): str(v) for k, v in headers.items()}
        table[str(name)] = entry
    return table


def toml_text(data: Mapping[str, Any]) -> str:
    """A mapping of strings, booleans, integers and nested mappings as TOML.

    Keys are always quoted and strings are JSON-escaped basic strings (valid TOML for every
    code point), so a hostile server name or token cannot break out of its value.
    """
    lines: list[str] = []

    def walk(table: Mapping[str, Any], path: Sequence[str]) -> None:
        scalars = [(k, v) for k, v in table.items() if not isinstance(v, Mapping)]
        tables = [(k, v) for k, v in table.items() if isinstance(v, Mapping)]
        if path and (scalars or not tables):
            lines.append("[" + ".".join(_key(p) for p in path) + "]")
        for key, value in scalars:
            lines.append(f"{_key(key)} = {_value(value)}")
        for key, value in tables:
            walk(value, [*path, key])

    walk(data, [])
    return "\n".join(lines) + "\n"


def _key(key: str) -> str:
    return _string(str(key))


def _string(text: str) -> str:
    # JSON escapes quotes, backslashes and control characters the way TOML reads them; DEL is
    # the one character TOML also wants escaped.
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return _string(value)
    raise TypeError(f"no TOML rendering for {type(value).__name__}")
