"""The inference endpoint a turn's environment names, and the shell step that seeds it as provider `crucible`.

Which API a turn speaks follows its environment, in this order:

- `OPENAI_BASE_URL` set: OpenAI Chat Completions at that URL, with `OPENAI_API_KEY`;
- else `OPENAI_API_KEY` set (and not both keys with a `claude*` model): OpenAI's own API at
  api.openai.com, over the Responses API (its current models refuse tools over chat);
- else the Anthropic Messages API at `ANTHROPIC_BASE_URL` (default api.anthropic.com), with
  `ANTHROPIC_API_KEY`.

The choice is made by a few lines of `sh` at the start of the turn's command, in the turn's own
environment, not here: a sandbox's key may be injected by its gateway and a pod's comes from its
deploy profile, so only the turn itself sees what it will run with. The harness writes one
config template per API (its own format, the base URL left as `BASE_URL_SLOT`); the step picks
the template, puts the URL in and writes the CLI's config, or refuses the turn before the CLI
starts when the chosen API's key is missing. The key is never written: each CLI's config reads
it back from the environment by name.
"""

from __future__ import annotations

import enum
import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from urllib.parse import urlsplit

from crucible_core.api import Completed, EgressEndpoint, EgressReach, ManifestError

PROVIDER = "crucible"  # the provider id both CLIs get, and the prefix opencode's model rides on
OPENAI_URL = "https://api.openai.com/v1"
ANTHROPIC_URL = "https://api.anthropic.com"
BASE_URL_SLOT = "@@crucible-base-url@@"  # where a template's base URL goes; JSON-safe as it is
_HOST = re.compile(r"[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?")

# The exit status and stderr prefix of a turn the seed step refused (no key): not the CLI's.
REFUSED_EXIT = 78
REFUSED_PREFIX = "crucible: the turn was refused: "

CREDENTIAL_HINT = (
    "no key for the inference endpoint: set OPENAI_API_KEY (and OPENAI_BASE_URL for an endpoint "
    "other than api.openai.com) or ANTHROPIC_API_KEY in [agent].env"
)
OPENAI_KEY_HINT = "OPENAI_BASE_URL names an endpoint but OPENAI_API_KEY is not set: set it in [agent].env"


class Wire(enum.StrEnum):
    """The API a turn speaks; each names the harness's config template for it."""

    CHAT = "chat"  # OpenAI Chat Completions at OPENAI_BASE_URL
    RESPONSES = "responses"  # api.openai.com itself, over the Responses API
    ANTHROPIC = "anthropic"  # the Anthropic Messages API

    @property
    def key_variable(self) -> str:
        return "ANTHROPIC_API_KEY" if self is Wire.ANTHROPIC else "OPENAI_API_KEY"


def credential_problem(env: Mapping[str, str]) -> str | None:
    """Why a turn in `env` would be refused for want of a key (with the fix), or None.

    The same rule as the seed step's, for the places that see the environment before the turn
    (the host's preflight, a local turn): a sandbox may still be handed its key by its gateway.
    """
    if env.get("OPENAI_BASE_URL") and not env.get("OPENAI_API_KEY"):
        return OPENAI_KEY_HINT
    if env.get("OPENAI_API_KEY") or env.get("ANTHROPIC_API_KEY"):
        return None
    return CREDENTIAL_HINT


def endpoint_hosts(env: Mapping[str, str]) -> list[tuple[str, int]]:
    """The (host, port) pairs a turn in `env` may reach for its model: api.openai.com, and each base
    URL's host. A URL that names no plain host name (an IP literal in brackets, a typo) adds
    nothing: the turn then fails to reach it, loudly, rather than the allowlist holding a guess."""
    hosts = [("api.openai.com", 443)]
    for name in ("OPENAI_BASE_URL", "ANTHROPIC_BASE_URL"):
        try:
            parts = urlsplit(env.get(name, "").strip())
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            continue
        host = parts.hostname or ""
        if parts.scheme in ("http", "https") and _HOST.fullmatch(host) and (host, port) not in hosts:
            hosts.append((host, port))
    return hosts


def sandbox_reach(env: Mapping[str, str], binaries: Sequence[str]) -> EgressReach:
    """What a confining sandbox must let a turn in `env` reach (its endpoint's hosts), and the
    programs of the CLI that open those connections: standing reach of the harness."""
    endpoints = tuple(EgressEndpoint(host, port, "full", "built-in") for host, port in endpoint_hosts(env))
    return EgressReach(restricted=True, endpoints=endpoints, binaries=tuple(binaries))


def refusal(done: Completed) -> str | None:
    """The seed step's reason when it refused the turn, else None."""
    if done.exit_code != REFUSED_EXIT:
        return None
    for line in done.stderr.splitlines():
        if line.startswith(REFUSED_PREFIX):
            return line[len(REFUSED_PREFIX) :].strip()
    return None


def template_files(private: str, render: Callable[[Wire], str]) -> dict[str, bytes]:
    """The harness's config template for each API, as files of the turn's private directory."""
    return {f"{private}/templates/{wire.value}.json": render(wire).encode("utf-8") for wire in Wire}


def seed_step(config: str, private: str, model: str) -> str:
    """`sh` lines that choose the API from the environment, then write `config` from its template.

    `private` is the turn's private directory, holding the templates (`template_files`). On a
    missing key or a base URL no JSON string may hold, the lines print why on stderr and exit
    REFUSED_EXIT, so nothing has been started and nothing spent.
    """
    refuse = f'printf "%s\\n" "{REFUSED_PREFIX}$crucible_why" >&2; exit {REFUSED_EXIT}'
    return f"""\
crucible_config={shlex.quote(config)}
crucible_templates={shlex.quote(f"{private}/templates")}
crucible_model={shlex.quote(model)}
if [ -n "${{OPENAI_BASE_URL:-}}" ]; then
  crucible_wire={Wire.CHAT.value} crucible_url=$OPENAI_BASE_URL
  [ -n "${{OPENAI_API_KEY:-}}" ] || {{ crucible_why={shlex.quote(OPENAI_KEY_HINT)}; {refuse}; }}
elif [ -n "${{OPENAI_API_KEY:-}}" ] && {{ [ -z "${{ANTHROPIC_API_KEY:-}}" ] || [ "${{crucible_model#claude}}" = "$crucible_model" ]; }}; then
  crucible_wire={Wire.RESPONSES.value} crucible_url={shlex.quote(OPENAI_URL)}
else
  crucible_wire={Wire.ANTHROPIC.value} crucible_url=${{ANTHROPIC_BASE_URL:-{ANTHROPIC_URL}}}
  [ -n "${{ANTHROPIC_API_KEY:-}}" ] || {{ crucible_why={shlex.quote(CREDENTIAL_HINT)}; {refuse}; }}
fi
case $crucible_url in
  *[\\"\\\\]*|*[![:graph:]]*)
    crucible_why="the endpoint's base URL has a quote, a backslash, a space or a control character"
    {refuse} ;;
esac
crucible_template=$(cat "$crucible_templates/$crucible_wire.json") || {{
  crucible_why="the config template for $crucible_wire is missing"; {refuse}; }}
(umask 077 && printf '%s%s%s\\n' "${{crucible_template%%{BASE_URL_SLOT}*}}" "$crucible_url" \\
  "${{crucible_template#*{BASE_URL_SLOT}}}" > "$crucible_config") || {{
  crucible_why="could not write $crucible_config"; {refuse}; }}
"""


def resolve_model(own: str | None, shared: str | None, harness: str) -> str:
    """The model a turn asks the endpoint for: `[agent.<harness>].model`, else `[agent].model` (or --model).

    There is no default: an endpoint serves the models it serves, and only the manifest knows them.
    """
    model = own or shared
    if not model:
        raise ManifestError(
            f"harness {harness!r} needs a model: the endpoint serves the models it serves",
            hint=f"set [agent.{harness}].model (or [agent].model) to a model your endpoint serves",
        )
    return model
