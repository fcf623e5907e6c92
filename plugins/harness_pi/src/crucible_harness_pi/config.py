"""The files a pi turn runs with: models.json (one template per API the endpoint may speak) and settings.json.

The endpoint is registered as provider `crucible` with the turn's model under it, so pi never
consults its own model list; the key is named, never written (pi reads the variable it names).
Pure: rendering starts nothing.
"""

from __future__ import annotations

import json

from crucible_harness_endpoint.endpoint import BASE_URL_SLOT, PROVIDER, Wire

# pi's name for each API.
_APIS = {
    Wire.CHAT: "openai-completions",
    Wire.RESPONSES: "openai-responses",
    Wire.ANTHROPIC: "anthropic-messages",
}

# The workspace's own project files (its skills: where the toolbox lands) are trusted without a
# prompt. Pi releases from 0.79 gate them behind a trust decision (`--approve` on the command
# line); this setting is the same decision in a form older releases ignore instead of refusing
# as an unknown option.
SETTINGS = {"defaultProjectTrust": "always", "quietStartup": True, "enableInstallTelemetry": False}


def render_models(wire: Wire, model: str, *, reasoning: bool) -> str:
    """models.json for one API, its base URL left as the seed step's slot."""
    provider: dict[str, object] = {
        "baseUrl": BASE_URL_SLOT,
        "api": _APIS[wire],
        "apiKey": wire.key_variable,  # a variable's name: pi reads its value from the environment
        "models": [
            {
                "id": model,
                "name": model,
                "reasoning": reasoning,
                "input": ["text"],
                "contextWindow": 128_000,
                "maxTokens": 16_384,
            }
        ],
    }
    if wire is Wire.CHAT:
        # Servers behind OPENAI_BASE_URL (vLLM, SGLang, gateways) often refuse the `developer` role.
        provider["compat"] = {"supportsDeveloperRole": False}
    return json.dumps({"providers": {PROVIDER: provider}}, indent=1)


def render_settings() -> str:
    return json.dumps(SETTINGS, indent=1)
