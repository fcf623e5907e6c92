"""The Claude harnesses' own manifest keys and defaults: [agent].toolbox_dir, the default model."""

from __future__ import annotations

import attrs

# The model a turn uses when neither [agent].model nor --model names one.
DEFAULT_MODEL = "claude-opus-4-6"


@attrs.frozen
class ClaudeSettings:
    # A directory of skills (relative to the manifest) copied to <workspace>/.claude/skills each turn.
    toolbox_dir: str | None = None
