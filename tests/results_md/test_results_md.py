"""crucible-plugin-results-md: RESULTS.md and its chart come from this plugin alone, rewritten
after every row and, on resume, at run start.

Real runs of the counter example in this process (the git world, the real measure script).
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from crucible_core import api
from crucible_core.plugins import load_plugins
from crucible_core.session_log import read_events

INSTALLED = sorted(ep.name for ep in entry_points(group="crucible"))


def _decisions(log: Path) -> list[tuple[int, str, Any]]:
    return [
        (e["row"]["iter"], e["row"]["decision"], e["row"]["score"])
        for e in read_events(log)
        if e["kind"] == "row"
    ]


def test_the_page_shows_every_row_and_the_chart_beside_it(example: Any) -> None:
    manifest = example("counter")
    workspace = manifest.parent / "workspace"
    pages: list[str] = []

    def after_each_row(event: Mapping[str, Any]) -> None:
        if event["kind"] == "budget":  # the event after each row: the page already shows that row
            pages.append((workspace / "RESULTS.md").read_text())

    api.run(manifest, iterations=2, on_event=after_each_row)

    assert "| 0 | baseline | 0 | 0 | +0 |" in pages[0] and "| 1 |" not in pages[0]
    assert "| 1 | keep | 1 | 1 | +1 |" in pages[1] and "| 2 |" not in pages[1]
    page = (workspace / "RESULTS.md").read_text()
    assert page == pages[-1]
    assert page.startswith("# crucible results\n\nObjective: ") and "Best so far: 2." in page
    assert "![score by iteration](RESULTS-score.svg)" in page and "| 2 | keep | 2 | 2 | +2 |" in page
    assert (workspace / "RESULTS-score.svg").read_text().count('class="point"') == 2


def test_a_resume_rewrites_the_page_at_run_start_from_the_recorded_rows(example: Any) -> None:
    manifest = example("counter")
    workspace = manifest.parent / "workspace"
    api.run(manifest, iterations=1)
    (workspace / "RESULTS.md").unlink()
    (workspace / "RESULTS-score.svg").unlink()
    at_first_step: list[str] = []
    resumed: list[bool] = []

    def watch(event: Mapping[str, Any]) -> None:
        if event["kind"] == "start":
            resumed.append(bool(event.get("resumed")))
        elif event["kind"] == "step" and not at_first_step:  # run start is over, no row written yet
            page = workspace / "RESULTS.md"
            at_first_step.append(page.read_text() if page.exists() else "")

    api.run(manifest, iterations=2, resume=True, on_event=watch)

    assert resumed == [True]
    assert (
        "| 0 | baseline | 0 | 0 | +0 |" in at_first_step[0]
        and "| 1 | keep | 1 | 1 | +1 |" in at_first_step[0]
    )
    assert "| 2 |" not in at_first_step[0] and (workspace / "RESULTS-score.svg").exists()
    assert "| 2 | keep | 2 | 2 | +2 |" in (workspace / "RESULTS.md").read_text()


def test_without_the_plugin_the_run_is_the_same_and_writes_no_page(example: Any, tmp_path: Path) -> None:
    with_it = example("counter")
    without = tmp_path / "without" / "counter" / "crucible.toml"
    shutil.copytree(with_it.parent, without.parent)

    kept = api.run(with_it, iterations=2, plugins=load_plugins(names=INSTALLED))
    bare = api.run(
        without, iterations=2, plugins=load_plugins(names=[n for n in INSTALLED if n != "results_md"])
    )

    assert (with_it.parent / "workspace" / "RESULTS.md").is_file()
    assert (with_it.parent / "workspace" / "RESULTS-score.svg").is_file()
    assert not (without.parent / "workspace" / "RESULTS.md").exists()
    assert not (without.parent / "workspace" / "RESULTS-score.svg").exists()
    assert _decisions(kept.session_log) == _decisions(bare.session_log)
    assert (kept.outcome, kept.best, kept.kept) == (bare.outcome, bare.best, bare.kept)


def test_a_page_that_cannot_be_written_is_a_warning_and_the_run_goes_on(example: Any) -> None:
    manifest = example("counter")
    workspace = manifest.parent / "workspace"

    def block(event: Mapping[str, Any]) -> None:
        if event["kind"] == "identity":  # the workspace is set up: a directory takes the page's name
            (workspace / "RESULTS.md" / "inside").mkdir(parents=True)

    result = api.run(manifest, iterations=1, on_event=block)

    assert result.outcome == "finished" and result.kept == 1
    warnings = [e["msg"] for e in read_events(result.session_log) if e["kind"] == "note"]
    assert sum(text.startswith("could not update RESULTS.md: ") for text in warnings) == 2  # baseline, 1


def test_a_link_planted_at_the_pages_temporary_name_is_not_written_through(
    example: Any, tmp_path: Path
) -> None:
    import os

    manifest = example("counter")
    workspace = manifest.parent / "workspace"
    outside = tmp_path / "outside.txt"
    outside.write_text("the user's file\n")

    def plant(event: Mapping[str, Any]) -> None:
        if event["kind"] == "identity":  # the agent can write the workspace: it knows our pid
            for name in ("RESULTS.md", "RESULTS-score.svg"):
                (workspace / f".{name}.tmp{os.getpid()}").symlink_to(outside)

    result = api.run(manifest, iterations=2, on_event=plant)

    assert result.outcome == "finished"
    assert outside.read_text() == "the user's file\n"  # the page went to its own file, not through the link
    assert not (workspace / "RESULTS.md").is_symlink()
    assert "| 2 |" in (workspace / "RESULTS.md").read_text()


def test_page_and_chart_kept_row_by_row_are_those_rendered_whole_across_a_rescope(tmp_path: Path) -> None:
    from crucible_results_md.chart import RESULTS_CHART_NAME, render_results_chart
    from crucible_results_md.document import render_results
    from crucible_results_md.view import RESULTS_NAME, ResultsView

    def row(
        i: int, decision: str, score: float | None, best: float, note: str = "", valid: bool = True
    ) -> dict:
        return {"v": 1, "kind": "row", "solved": False,
                "row": {"iter": i, "decision": decision, "valid": valid, "score": score, "best": best,
                        "note": note, "detail": "", "margin": 0.5}}  # fmt: skip

    events = [
        row(0, "baseline", 10.0, 10.0),
        row(1, "keep", 12.0, 12.0, "a | b\nc"),
        row(2, "discard", 11.0, 12.0, "short of the margin"),
        row(3, "discard", None, 12.0, "no reading", valid=False),
        row(4, "baseline", 20.0, 20.0, "rescoped"),  # every earlier row's "vs baseline" moves
        row(5, "keep", 25.0, 25.0),
    ]
    view = ResultsView(
        workspace=tmp_path,
        goal="g",
        gate="value",
        direction="higher",
        scored=True,
        note=lambda text, level: None,
        chart_every=0.0,  # the chart redrawn with every row, to compare it row by row
    )
    first_rows: list[str] = []
    for count, event in enumerate(events, start=1):
        view.row(event)
        whole = render_results(gate="value", goal="g", rows=view.rows, best=view.best, direction="higher",
                               chart=RESULTS_CHART_NAME)  # fmt: skip
        assert (tmp_path / RESULTS_NAME).read_text() == whole, f"after {count} rows"
        # the chart's points are folded one row at a time too: the same drawing as from every row
        chart = render_results_chart(view.rows, direction="higher")
        assert (tmp_path / RESULTS_CHART_NAME).read_text() == chart, f"after {count} rows"
        first_rows.append(
            next(line for line in whole.splitlines() if line.startswith("| 1 |")) if count > 1 else ""
        )
    assert first_rows[3] != first_rows[4]  # the rescope's baseline re-rendered the rows before it


def test_rows_faster_than_the_charts_interval_are_drawn_when_it_passes_and_at_run_end(tmp_path: Path) -> None:
    from crucible_results_md.chart import RESULTS_CHART_NAME, render_results_chart
    from crucible_results_md.view import RESULTS_NAME, ResultsView

    now = [100.0]
    view = ResultsView(workspace=tmp_path, goal="g", gate="value", direction="higher", scored=True,
                       note=lambda text, level: None, chart_every=1.0, clock=lambda: now[0])  # fmt: skip
    chart, page = tmp_path / RESULTS_CHART_NAME, tmp_path / RESULTS_NAME

    def row(i: int) -> dict:
        decision = "baseline" if i == 0 else "keep"
        return {"v": 1, "kind": "row", "solved": False,
                "row": {"iter": i, "decision": decision, "valid": True, "score": float(i), "best": float(i),
                        "note": "", "detail": ""}}  # fmt: skip

    view.row(row(0))  # the first row draws the chart: the page links it from the start
    assert chart.read_text() == render_results_chart(view.rows, direction="higher")
    now[0] += 0.3
    view.row(row(1))
    view.row(row(2))
    assert "| 2 | keep | 2 |" in page.read_text()  # the page shows every row at once
    assert chart.read_text() == render_results_chart(view.rows[:1], direction="higher")
    now[0] += 0.7  # a second since the last drawing: the next row redraws it whole
    view.row(row(3))
    assert chart.read_text() == render_results_chart(view.rows, direction="higher")
    now[0] += 0.1
    view.row(row(4))
    assert 'data-iter="4"' not in chart.read_text()
    view.finish()  # the run ends: the chart owed is drawn
    assert chart.read_text() == render_results_chart(view.rows, direction="higher")
