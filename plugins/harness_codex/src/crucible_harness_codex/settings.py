"""The codex harness's own manifest keys ([agent.codex]: model, auth, api_key) and the reach its CLI needs.

Validated by core's strict converter (plugin-owned settings): an unknown key or a bad value is
refused with its key path, naming this plugin. Importing this module is cheap.
"""

from __future__ import annotations

import re

import attrs

from crucible_core.api import BUILTIN, EgressEndpoint, EgressReach

# The model a turn uses when neither [agent.codex].model nor a non-Claude [agent].model names one.
DEFAULT_MODEL = "gpt-5.6-sol"
AUTH_MODES = ("auto", "api", "chatgpt")
# A key's name, never the variable: "WORK" selects OPENAI_API_KEY_WORK, so a manifest cannot
# point the harness at any other host variable.
_KEY_NAME = re.compile(r"[A-Z0-9_]{1,64}")
# Claude Code's aliases for its models: a shared [agent].model spelled this way is a Claude model.
_CLAUDE_ALIASES = frozenset({"opus", "sonnet", "haiku", "fable", "mythos"})

# What the Codex CLI reaches from a sandbox on its own: the OpenAI API (api-key sign-in), the
# ChatGPT backend and its sign-in service (ChatGPT sign-in), and the ChatGPT edge its client
# uses. Per harness: a claude turn's allowlist does not carry them.
SANDBOX_HOSTS = ("chatgpt.com", "auth.openai.com", "api.openai.com", "ab.chatgpt.com")
# The programs that open those connections (OpenShell matches the kernel-resolved binary): the
# npm launcher is node, which starts the native binary shipped in a platform package.
SANDBOX_BINARIES = ("/usr/local/bin/codex", "/usr/local/lib/node_modules/@openai/**")


@attrs.frozen
class CodexTable:
    """[agent.codex]."""

    # Overrides [agent].model, which names a Claude model in most manifests.
    model: str | None = None
    # auto: the selected API key when it is set, else ChatGPT sign-in; api: the key or nothing;
    # chatgpt: the ChatGPT sign-in even when a key is set.
    auth: str = "auto"
    # Which of the deployment's OpenAI keys: "WORK" is OPENAI_API_KEY_WORK; unset, OPENAI_API_KEY.
    api_key: str | None = None

    def __attrs_post_init__(self) -> None:
        if self.auth not in AUTH_MODES:
            raise ValueError(f"[agent.codex].auth {self.auth!r} is not one of {', '.join(AUTH_MODES)}")
        if self.api_key is not None and not _KEY_NAME.fullmatch(self.api_key):
            raise ValueError(
                f"[agent.codex].api_key {self.api_key!r} must name a key in uppercase letters, digits "
                'and underscores (api_key = "WORK" selects OPENAI_API_KEY_WORK)'
            )
        if self.model is not None and (not self.model.strip() or any(c.isspace() for c in self.model)):
            raise ValueError(f"[agent.codex].model {self.model!r} must be a model name (no spaces)")

    @property
    def key_variable(self) -> str:
        return f"OPENAI_API_KEY_{self.api_key}" if self.api_key else "OPENAI_API_KEY"


@attrs.frozen
class CodexSettings:
    """The codex harness's keys: the [agent.codex] table."""

    codex: CodexTable = CodexTable()

    def sandbox_egress(self) -> EgressReach:
        """The reach the CLI needs inside a confining sandbox, added to that backend's allowlist."""
        return EgressReach(
            restricted=True,
            endpoints=tuple(EgressEndpoint(host, 443, "full", BUILTIN) for host in SANDBOX_HOSTS),
            binaries=SANDBOX_BINARIES,
        )

    def choose_model(self, shared: str | None) -> str:
        """[agent.codex].model, else the shared model unless it names a Claude model, else the default.

        The shared slot defaults to a Claude model (the default harness's), and the OpenAI
        backends answer a Claude name with an error.
        """
        if self.codex.model:
            return self.codex.model
        if shared and not shared.lower().startswith("claude") and shared.lower() not in _CLAUDE_ALIASES:
            return shared
        return DEFAULT_MODEL
