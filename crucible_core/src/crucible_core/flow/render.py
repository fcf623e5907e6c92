"""Choosing a rendering of the flow model by the output file's extension."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from crucible_core.errors import UsageError
from crucible_core.flow.graph import render_dot, render_mermaid
from crucible_core.flow.model import FlowModel
from crucible_core.flow.page import render_html


def render_json(model: FlowModel) -> str:
    return json.dumps(model.to_wire(), indent=2, ensure_ascii=False) + "\n"


RENDERERS: dict[str, Callable[[FlowModel], str]] = {
    ".json": render_json,
    ".dot": render_dot,
    ".mmd": render_mermaid,
    ".html": render_html,
}


def renderer_for(out: Path) -> Callable[[FlowModel], str]:
    suffix = out.suffix.lower()
    if suffix == ".htm":
        suffix = ".html"
    if suffix not in RENDERERS:
        raise UsageError(
            f"--out {out}: unknown extension {suffix or '(none)'}",
            hint="name the output .json, .dot, .mmd or .html",
        )
    return RENDERERS[suffix]
