"""The starting points `crucible init --template NAME` writes: each a manifest plus the files it names.

Templates are registered through `crucible_register_init_templates`; core ships none. A template
belongs to the plugin it needs (`claude` and `python-speed` are the Claude harness plugin's,
`playbook`, a workflow.star, the Starlark plugin's, and `command`, which needs no agent, comes
with crucible-plugin-packs).
"""

from __future__ import annotations

import attrs


@attrs.frozen(slots=False)
class InitTemplate:
    name: str
    summary: str
    files: dict[str, str]  # relative path -> content; "crucible.toml" is the manifest
    executable: frozenset[str] = frozenset()
    next_step: str = ""
