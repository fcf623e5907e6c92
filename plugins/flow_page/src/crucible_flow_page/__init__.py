"""crucible-plugin-flow-page: `crucible flow`, a run's session log rendered as a page, a graph or JSON.

`crucible flow --out FILE` (cli.py) folds the log into core's flow model and writes the rendering
FILE's extension names: the model as data (.json), a Graphviz or Mermaid graph (.dot, .mmd,
graph.py) or one self-contained page (.html). The page inlines its CSS, script and SVG (the score
chart, crucible-plugin-results-md's, or a task run's graph) and fetches nothing; every string from
the log is escaped (page.py says how). Only the registrations live here: each rendering and the
command load when used, so `crucible plugins` stays fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from crucible_core.api import Deferred, hookimpl

if TYPE_CHECKING:
    import click

    from crucible_core.api import FlowRenderer, Register


@hookimpl
def crucible_register_flow_renderers(register: Register[FlowRenderer]) -> None:
    register("json", Deferred("crucible_flow_page.renderers:render_json"))
    register("dot", Deferred("crucible_flow_page.graph:render_dot"))
    register("mmd", Deferred("crucible_flow_page.graph:render_mermaid"))
    register("html", Deferred("crucible_flow_page.page:render_html"))


@hookimpl
def crucible_register_commands(register: Register[click.Command]) -> None:
    register("flow", Deferred("crucible_flow_page.cli:command"))
