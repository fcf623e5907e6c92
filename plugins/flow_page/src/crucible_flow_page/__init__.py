"""crucible-plugin-flow-page: `crucible flow --out flow.html`, a run as one self-contained page.

The page inlines its CSS, script and SVG (the score chart, crucible-plugin-results-md's, or a
task run's graph) and fetches nothing; every string from the log is escaped (page.py says how).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from crucible_core.api import hookimpl

if TYPE_CHECKING:  # the flow model loads only when a page is rendered
    from crucible_core.api import FlowModel, FlowRenderer, Register


def render_page(model: FlowModel) -> str:
    from crucible_flow_page.page import render_html

    return render_html(model)


@hookimpl
def crucible_register_flow_renderers(register: Register[FlowRenderer]) -> None:
    register("html", render_page)
