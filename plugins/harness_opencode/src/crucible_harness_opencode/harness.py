"""The `opencode` harness: one turn of `opencode run`, then `opencode export` of its session, as one command.

The command is the same wherever it runs (this host, an OpenShell sandbox, a pod): a small `sh`
script that seeds opencode.json from the turn's environment (the shared seed step), runs
`opencode run --format json` with the prompt on stdin, and prints the session's export between
two marker lines. On the host, `run` carries that command out with a home of its own
(crucible_harness_endpoint.host_turn).

Every reach opencode makes on its own is turned off: the models catalogue fetch, autoupdate,
sharing, LSP downloads, its default plugins and external plugins (`--pure`), and the npm
install it starts for its plugin SDK (`npm_config_offline`). Each turn gets its own HOME and
XDG directories, so nothing lands in the user's home and no conversation outlives the turn.
"""

from __future__ import annotations

import secrets
import shlex
from collections.abc import Mapping
from pathlib import Path

import attrs

from crucible_core.api import HarnessContext, SandboxCommand, SandboxLayout, Turn
from crucible_harness_endpoint.cli_harness import EndpointCliHarness, refuse_session
from crucible_harness_endpoint.cli_lookup import PROGRAM_STEP, AgentCli
from crucible_harness_endpoint.endpoint import (
    PROVIDER,
    resolve_model,
    seed_step,
    template_files,
)
from crucible_harness_endpoint.toolbox import resolve_toolbox
from crucible_harness_endpoint.turn_env import turn_env
from crucible_harness_opencode import config
from crucible_harness_opencode.settings import SKILLS_DIR, OpenCodeSettings
from crucible_harness_opencode.stream import HARNESS, OpenCodeStream, begin_marker, end_marker
from crucible_harness_opencode.verdict import classify

CLI = AgentCli("opencode", "CRUCIBLE_OPENCODE_BIN", "npm install -g opencode-ai")

# Set unless [agent].env says otherwise: an unattended turn must not reach out on its own.
QUIET_DEFAULTS: Mapping[str, str] = {
    "OPENCODE_DISABLE_MODELS_FETCH": "1",
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    "OPENCODE_DISABLE_SHARE": "1",
    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
    "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
    # opencode installs its plugin SDK into each config directory through npm; offline, that
    # install fails at once (a warning in its log) instead of reaching the registry.
    "npm_config_offline": "true",
}
# What opencode's program must reach from a sandbox besides the endpoint (OpenShell matches the
# kernel-resolved binary: this must be the native binary, not npm's launcher script).
SANDBOX_BINARIES = ("/usr/local/bin/opencode",)


def wrapper(layout: SandboxLayout, model: str, nonce: str) -> str:
    """The turn's `sh` script: argv `$1` is the CLI, the rest `opencode run`'s arguments."""
    private = layout.private
    q = shlex.quote
    return f"""\
{PROGRAM_STEP}{seed_step(f"{private}/opencode.json", private, model)}
crucible_private={q(private)}
# The run's first event names its session; it is kept to export the session afterwards.
{{ "$crucible_cli" run "$@"; printf '%s\\n' "$?" > "$crucible_private/run.status"; }} |
  {{ IFS= read -r crucible_first && printf '%s\\n' "$crucible_first" | tee "$crucible_private/run.first"; cat; }}
crucible_status=$(cat "$crucible_private/run.status" 2>/dev/null) || crucible_status=1
crucible_session=$(sed -n 's/^{{"type":"[a-z_]*","timestamp":[0-9]*,"sessionID":"\\(ses_[A-Za-z0-9]*\\)".*/\\1/p' \\
  "$crucible_private/run.first" 2>/dev/null)
if [ -n "$crucible_session" ]; then
  if "$crucible_cli" export --pure "$crucible_session" </dev/null \\
      >"$crucible_private/export.json" 2>"$crucible_private/export.err"; then
    printf '%s\\n' {q(begin_marker(nonce))}
    cat "$crucible_private/export.json"
    printf '\\n%s\\n' {q(end_marker(nonce))}
  else
    printf '%s\\n' "crucible: opencode export $crucible_session failed" >&2
    tail -n 5 "$crucible_private/export.err" >&2
  fi
fi
exit "$crucible_status"
"""


@attrs.frozen
class OpenCodeHarness(EndpointCliHarness):
    cli = CLI
    skills_dir = SKILLS_DIR
    sandbox_binaries = SANDBOX_BINARIES
    model: str
    toolbox: Path | None = None
    agent_env: Mapping[str, str] = attrs.field(factory=dict)

    @classmethod
    def from_context(cls, ctx: HarnessContext) -> OpenCodeHarness:
        settings = ctx.settings if isinstance(ctx.settings, OpenCodeSettings) else OpenCodeSettings()
        refuse_session(HARNESS, ctx.agent.session)
        model = resolve_model(settings.opencode.model, ctx.agent.model, HARNESS)
        return cls(model, resolve_toolbox(settings.toolbox_dir, ctx.manifest_dir), dict(ctx.agent.env))

    def command(self, turn: Turn, layout: SandboxLayout, program: str, *, confined: bool) -> SandboxCommand:
        """`confined` (a sandbox or pod): every permission allowed, because the box is the boundary."""
        nonce = secrets.token_hex(8)
        files = template_files(
            layout.private, lambda wire: config.render(wire, self.model, turn.mcp_servers, confined=confined)
        )
        env = turn_env(
            turn.env, layout.home, QUIET_DEFAULTS, OPENCODE_CONFIG=f"{layout.private}/opencode.json"
        )
        argv = [
            "sh",
            "-c",
            wrapper(layout, self.model, nonce),
            "crucible-opencode",
            program,
            "--format",
            "json",
            "--pure",
            # Permissions the config does not deny are granted: nobody is there to answer a question.
            "--auto",
            "--thinking",
            "--model",
            f"{PROVIDER}/{self.model}",
            # A title of our own: opencode would otherwise spend a model call per turn writing one.
            "--title",
            f"crucible iteration {turn.iteration}",
        ]
        stream = OpenCodeStream(turn.emit, self.model, nonce)
        return SandboxCommand(
            argv=tuple(argv),
            env=env,
            stdin=turn.prompt.encode("utf-8"),
            on_stdout_line=stream.feed,
            finish=lambda done: classify(done, stream),
            files=files,
        )
