"""The opencode harness's own manifest keys: [agent].toolbox_dir and the [agent.opencode] table.

Validated by core's strict converter (plugin-owned settings). Importing this module is cheap.
"""

from __future__ import annotations

import attrs

# OpenCode discovers Claude Code's project skills, so the toolbox lands where claude's does (the
# plugin's SPARED keeps a restore away from it).
SKILLS_DIR = ".claude/skills"


@attrs.frozen
class OpenCodeTable:
    """[agent.opencode]."""

    # Overrides [agent].model, which in a shared manifest often names the default harness's model.
    model: str | None = None

    def __attrs_post_init__(self) -> None:
        if self.model is not None and (
            not self.model.strip() or not self.model.isprintable() or " " in self.model
        ):
            raise ValueError(f"[agent.opencode].model {self.model!r} must be a model name (no spaces)")


@attrs.frozen
class OpenCodeSettings:
    # A directory of skills (relative to the manifest) copied to <workspace>/.claude/skills each turn.
    toolbox_dir: str | None = None
    opencode: OpenCodeTable = OpenCodeTable()
