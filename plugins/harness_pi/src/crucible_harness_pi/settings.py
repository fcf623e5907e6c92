"""The pi harness's own manifest keys: [agent].toolbox_dir and the [agent.pi] table.

Validated by core's strict converter (plugin-owned settings). Importing this module is cheap.
"""

from __future__ import annotations

import attrs

# Pi discovers project skills under .agents/skills (the Agent Skills layout; the plugin's SPARED
# keeps a restore away from it).
SKILLS_DIR = ".agents/skills"


@attrs.frozen
class PiTable:
    """[agent.pi]."""

    # Overrides [agent].model, which in a shared manifest often names the default harness's model.
    model: str | None = None

    def __attrs_post_init__(self) -> None:
        if self.model is not None and (
            not self.model.strip() or not self.model.isprintable() or " " in self.model
        ):
            raise ValueError(f"[agent.pi].model {self.model!r} must be a model name (no spaces)")


@attrs.frozen
class PiSettings:
    # A directory of skills (relative to the manifest) copied to <workspace>/.agents/skills each turn.
    toolbox_dir: str | None = None
    pi: PiTable = PiTable()
