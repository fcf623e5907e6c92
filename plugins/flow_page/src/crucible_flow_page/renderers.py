"""Choosing a rendering of the flow model by the output file's extension, among those plugins register.

This plugin registers the model as data (json), the graphs (dot, mmd, in graph.py) and the page
(html, in page.py); another plugin may add its own through crucible_register_flow_renderers.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from crucible_core.api import UsageError

if TYPE_CHECKING:
    from crucible_core.api import FlowModel, FlowRenderer, Plugins

KIND = "flow renderer"
# Another spelling of a registered extension: it renders the same.
_SPELLINGS = {"htm": "html"}


def render_json(model: FlowModel) -> str:
    return json.dumps(model.to_wire(), indent=2, ensure_ascii=False) + "\n"


def renderer_for(plugins: Plugins, out: Path) -> FlowRenderer:
    """The renderer `out`'s extension names; a UsageError for an extension nothing renders."""
    suffix = out.suffix.lower().lstrip(".")
    name = _SPELLINGS.get(suffix, suffix)
    renderers = plugins.registry(KIND)
    if name in renderers:
        renderer: FlowRenderer = renderers.get(name, where=f"--out {out}")
        return renderer
    shown = [f".{known}" for known in renderers.names()]  # this plugin's own four at least
    raise UsageError(
        f"--out {out}: unknown extension {f'.{suffix}' if suffix else '(none)'}",
        hint=f"name the output {', '.join(shown[:-1])} or {shown[-1]}",
    )
