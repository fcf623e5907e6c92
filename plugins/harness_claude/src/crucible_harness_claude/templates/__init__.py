"""The `crucible init` templates that need the Claude harness: `claude` (the default) and `python-speed`."""

from __future__ import annotations

from crucible_core.api import InitTemplate
from crucible_harness_claude.templates import claude, python_speed

TEMPLATES = (
    InitTemplate(
        "claude",
        "Claude Code improves your repository against your measure.sh (the default)",
        claude.FILES,
        frozenset({"measure.sh"}),
        "edit the goal and measure.sh, then `crucible check`: "
        "it also checks that the Claude Code CLI and its credentials are there",
    ),
    InitTemplate(
        "python-speed",
        "make a Python function faster; a correctness check guards every reading",
        python_speed.FILES,
        frozenset(),
        "commit slow.py, `crucible check`, then `crucible run --iterations 5`",
    ),
)
