"""The starting points `crucible init --template NAME` writes: each a manifest plus the files it names."""

from __future__ import annotations

import attrs

from crucible_core.init_templates import claude, command, playbook, python_speed


@attrs.frozen
class Template:
    name: str
    summary: str
    files: dict[str, str]  # relative path -> content
    executable: frozenset[str] = frozenset()
    next_step: str = ""


TEMPLATES: dict[str, Template] = {
    "claude": Template(
        "claude",
        "Claude Code improves your repository against your measure.sh (the default)",
        claude.FILES,
        frozenset({"measure.sh"}),
        "edit the goal and measure.sh, then `crucible check`: "
        "it also checks that the Claude Code CLI and its credentials are there",
    ),
    "command": Template(
        "command",
        "a shell script proposes each change: no agent, no credentials",
        command.FILES,
        frozenset({"measure.sh", "propose.sh"}),
        "`crucible check`, then `crucible run --iterations 3`; then make propose.sh and measure.sh yours",
    ),
    "python-speed": Template(
        "python-speed",
        "make a Python function faster; a correctness check guards every reading",
        python_speed.FILES,
        frozenset(),
        "commit slow.py, `crucible check`, then `crucible run --iterations 5`",
    ),
    "playbook": Template(
        "playbook",
        "a graph of steps that runs once, with no judge: no agent, no credentials",
        playbook.FILES,
        frozenset({"gather.sh", "agent.sh"}),
        "`crucible check`, then `crucible run --max-cost 0.5 --max-time 5m`; then make workflow.star yours",
    ),
}
DEFAULT_TEMPLATE = "claude"
