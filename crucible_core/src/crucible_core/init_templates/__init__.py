"""The starting points `crucible init --template NAME` writes: each a manifest plus the files it names.

Templates are registered through `crucible_register_init_templates`. Core registers the one that
needs only core and the plugins every install has (`command`: the git world, the command judge
and backend); a template that only makes sense with a given plugin is that plugin's (`claude` and
`python-speed` are the Claude harness plugin's, `playbook`, a workflow.star, the Starlark plugin's).
"""

from __future__ import annotations

import attrs

from crucible_core.init_templates import command


@attrs.frozen
class InitTemplate:
    name: str
    summary: str
    files: dict[str, str]  # relative path -> content; "crucible.toml" is the manifest
    executable: frozenset[str] = frozenset()
    next_step: str = ""


DEFAULT_TEMPLATE = "claude"  # crucible-plugin-harness-claude's (registry.PROVIDERS)

CORE_TEMPLATES = (
    InitTemplate(
        "command",
        "a shell script proposes each change: no agent, no credentials",
        command.FILES,
        frozenset({"measure.sh", "propose.sh"}),
        "`crucible check`, then `crucible run --iterations 3`; then make propose.sh and measure.sh yours",
    ),
)
