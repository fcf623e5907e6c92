"""The Claude harnesses' own manifest keys and defaults: [agent].toolbox_dir and otlp_cost, the default model."""

from __future__ import annotations

import attrs

# The model a turn uses when neither [agent].model nor --model names one.
DEFAULT_MODEL = "claude-opus-4-6"


@attrs.frozen
class ClaudeSettings:
    # A directory of skills (relative to the manifest) copied to <workspace>/.claude/skills each turn.
    toolbox_dir: str | None = None
    # The `claude` harness runs a loopback OTLP receiver per turn and takes the CLI's own cost
    # metrics as a second cost source (otlp_cost.py). Off by default: it switches the CLI's telemetry on.
    otlp_cost: bool = False
