"""Finding an agent CLI: the variable that names its binary, else its name on the turn's PATH."""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path

import attrs


@attrs.frozen
class AgentCli:
    """One CLI: the program's name, the variable that may name its binary, how to install it."""

    name: str  # "opencode"
    bin_env: str  # "CRUCIBLE_OPENCODE_BIN"
    install: str  # "npm install -g opencode-ai"

    def find(self, env: Mapping[str, str]) -> Path | None:
        """The turn's `bin_env`, else the engine's, else `name` on the turn's PATH."""
        configured = env.get(self.bin_env) or os.environ.get(self.bin_env)
        search_path = env.get("PATH", os.defpath)
        if configured and os.sep in configured:
            path = Path(configured).expanduser()
            return path if path.is_file() and os.access(path, os.X_OK) else None
        found = shutil.which(configured or self.name, path=search_path)
        return Path(found) if found else None

    def in_sandbox(self, env: Mapping[str, str]) -> str:
        """The program a sandbox or pod runs: `bin_env` as the turn there sets it, else the name on its PATH."""
        return env.get(self.bin_env) or self.name

    def missing_note(self, env: Mapping[str, str]) -> str:
        configured = env.get(self.bin_env) or os.environ.get(self.bin_env)
        looked = f"{self.bin_env}={configured}" if configured else f"`{self.name}` on PATH"
        return (
            f"the {self.name} CLI was not found ({looked}): install it with `{self.install}`, "
            f"or set {self.bin_env} to the path of its `{self.name}` binary"
        )


# The first lines of a turn's `sh` script whose `$1` is the CLI: it must be there (127 says it
# is not, as a shell would), then the script's arguments are the CLI's; the turn's TMPDIR
# (turn_env) is made.
PROGRAM_STEP = """\
crucible_cli=$1
shift
command -v "$crucible_cli" >/dev/null 2>&1 || {
  printf '%s\\n' "crucible: $crucible_cli is not on the PATH" >&2; exit 127; }
mkdir -p "${TMPDIR:-/tmp}" || exit 1
"""
