"""The flow model's graph renderings (DOT, Mermaid) and the wall-clock an exported trace adds to it."""

from __future__ import annotations

import json
from pathlib import Path

from crucible_flow_page.graph import render_dot, render_mermaid
from crucible_flow_page.spans import apply_spans, load_spans
from tests.flow.test_flow_model import model


def test_graph_renderings_chain_the_iterations_and_mark_the_resume() -> None:
    m = model()
    dot = render_dot(m)
    assert dot.startswith("digraph") and "iter3 -> iter4 [style=dashed" in dot and "iter5 -> outcome" in dot
    mmd = render_mermaid(m)
    assert mmd.startswith("flowchart LR") and "iter3 -.->|resume| iter4" in mmd
    assert "<script>" not in mmd  # the hostile note is entity-coded


def test_spans_add_wall_clock_per_iteration(tmp_path: Path) -> None:
    m = model()
    spans = [
        {"name": "turn", "start": 1_000_000_000, "duration": 2_000_000_000, "meta": {"crucible.iter": "1"}},
        {
            "name": "measure",
            "start": 3_000_000_000,
            "duration": 1_500_000_000,
            "meta": {"crucible.iter": "1"},
        },
        {"name": "setup", "start": 0, "duration": 5},
    ]
    assert apply_spans(m, spans) == 1
    assert m.iterations[0].wall_secs == 3.5 and m.iterations[1].wall_secs is None


def test_an_otlp_json_export_gives_the_same_wall_clock_and_skips_what_is_malformed(tmp_path: Path) -> None:
    def span(start: int, end: int, iteration: str) -> dict[str, object]:
        return {
            "name": "step",
            "startTimeUnixNano": str(start),
            "endTimeUnixNano": str(end),
            "attributes": [{"key": "crucible.iter", "value": {"intValue": iteration}}, "junk"],
        }

    export = {
        "resourceSpans": [
            {"scopeSpans": [{"spans": [span(1_000_000_000, 3_000_000_000, "1"), "junk"]}, 7]},
            {"scopeSpans": [{"spans": [span(3_000_000_000, 4_500_000_000, "1"), span(0, 9, "1e999")]}]},
            {"scopeSpans": {"spans": "not a list"}},
            5,
        ]
    }
    path = tmp_path / "otlp.json"
    path.write_text(json.dumps(export))
    m = model()
    assert apply_spans(m, load_spans(path)) == 1
    assert m.iterations[0].wall_secs == 3.5 and m.iterations[1].wall_secs is None
