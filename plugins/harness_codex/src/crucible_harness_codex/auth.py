"""Which credential a codex turn signs in with ([agent.codex].auth and api_key), and the auth file it gets.

Pure: the selection reads an environment mapping and the settings; minting a ChatGPT token
is oauth.py's. The manifest names a key, never a variable: api_key = "WORK" reads
OPENAI_API_KEY_WORK and nothing else, unset reads OPENAI_API_KEY, so a manifest cannot reach
any other credential of the host.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime

import attrs

from crucible_harness_codex.settings import CodexTable

# The ChatGPT sign-in's seed: the verbatim contents of `codex login`'s ~/.codex/auth.json.
CREDENTIALS_ENV = "CODEX_CREDENTIALS"
# Codex wants all four token fields in a ChatGPT auth file, or it drops the object and runs
# unauthenticated; the refresh token stays with the engine (the single refresher), so the file
# carries this in its place.
WITHHELD_REFRESH_TOKEN = "withheld-crucible-refreshes-on-the-engine-host"


@attrs.frozen
class ApiKey:
    variable: str  # where it came from, for messages (the value never is in one)
    value: str = attrs.field(repr=False)


@attrs.frozen
class ChatGpt:
    """The ChatGPT sign-in: a token minted per turn from the engine's OAuth material."""


@attrs.frozen
class Refused:
    reason: str  # one line that says what to do


Selection = ApiKey | ChatGpt | Refused


def select(table: CodexTable, env: Mapping[str, str], *, chatgpt_material: bool) -> Selection:
    """The credential `auth` selects; `chatgpt_material` says whether OAuth material is at hand."""
    variable = table.key_variable
    key = env.get(variable, "").strip()
    if table.auth == "api":
        if key:
            return ApiKey(variable, key)
        return Refused(
            f'[agent.codex].auth = "api" needs an OpenAI key in {variable}, which is not set: '
            f"export {variable}=<key> where crucible runs"
        )
    if table.auth == "auto" and key:
        return ApiKey(variable, key)
    if chatgpt_material:
        return ChatGpt()
    if table.auth == "chatgpt":
        return Refused(chatgpt_hint())
    return Refused(
        f"no credential for the Codex CLI: export {variable}=<OpenAI key> where crucible runs"
        + ("" if table.api_key else ' (or name another key with [agent.codex].api_key = "NAME")')
        + f", or set {CREDENTIALS_ENV} to the contents of ~/.codex/auth.json after `codex login`"
    )


def chatgpt_hint() -> str:
    return (
        f"the ChatGPT sign-in needs {CREDENTIALS_ENV}: run `codex login` on a machine with a browser "
        f"and set {CREDENTIALS_ENV} to the contents of its ~/.codex/auth.json"
    )


def api_key_file(key: ApiKey) -> bytes:
    """$CODEX_HOME/auth.json for the API-key sign-in."""
    return json.dumps({"auth_mode": "apikey", "OPENAI_API_KEY": key.value}).encode()


def chatgpt_file(access_token: str, account_id: str, id_token: str, *, now: datetime | None = None) -> bytes:
    """$CODEX_HOME/auth.json for the ChatGPT sign-in: a short-lived token, no refresh token."""
    stamp = (now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return json.dumps(
        {
            "OPENAI_API_KEY": None,
            "auth_mode": "chatgpt",
            "tokens": {
                "access_token": access_token,
                "account_id": account_id,
                "id_token": id_token,
                "refresh_token": WITHHELD_REFRESH_TOKEN,
            },
            # Now: the CLI refreshes a token it believes stale itself, and it must never try.
            "last_refresh": stamp,
        }
    ).encode()
