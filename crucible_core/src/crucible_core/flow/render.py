"""Choosing a rendering of the flow model by the output file's extension, among those plugins register.

Core registers the model as data (json) and the graphs (dot, mmd, in graph.py); the page (html) is
crucible-plugin-flow-page's.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from crucible_core.errors import UsageError
from crucible_core.registry import provider_of

if TYPE_CHECKING:
    from crucible_core.flow.model import FlowModel
    from crucible_core.plugins import Plugins

# A function from the model to the file's text. Registering one loads nothing else: the model and
# the graphs load only when a rendering is written, so `crucible plugins` stays fast.
FlowRenderer = Callable[["FlowModel"], str]

KIND = "flow renderer"
# Another spelling of a registered extension: it renders the same.
_SPELLINGS = {"htm": "html"}


def render_json(model: FlowModel) -> str:
    return json.dumps(model.to_wire(), indent=2, ensure_ascii=False) + "\n"


def render_dot(model: FlowModel) -> str:
    from crucible_core.flow import graph

    return graph.render_dot(model)


def render_mermaid(model: FlowModel) -> str:
    from crucible_core.flow import graph

    return graph.render_mermaid(model)


def renderer_for(plugins: Plugins, out: Path) -> FlowRenderer:
    """The renderer `out`'s extension names; a PluginError naming the distribution that provides a
    known one that is not installed, a UsageError for an extension nothing renders."""
    suffix = out.suffix.lower().lstrip(".")
    name = _SPELLINGS.get(suffix, suffix)
    renderers = plugins.registry(KIND)
    if name in renderers or provider_of(KIND, name):
        renderer: FlowRenderer = renderers.get(name, where=f"--out {out}")
        return renderer
    shown = [f".{known}" for known in renderers.names()]  # core's own three at least
    raise UsageError(
        f"--out {out}: unknown extension {f'.{suffix}' if suffix else '(none)'}",
        hint=f"name the output {', '.join(shown[:-1])} or {shown[-1]}",
    )
