"""crucible-plugin-results-md: RESULTS.md and RESULTS-score.svg in a loop run's workspace.

A view of the session log (docs/architecture.md): it hears the run's start line and its rows
through `crucible_session_event`, and at `crucible_run_start` (a loop run only) opens the page,
folding the log of a resumed run for its earlier rows. After every row it rewrites the page, and
the chart at most once a second while rows come faster; `crucible_run_end` draws the last chart.
The agent reads the page as the run's history; nothing else in crucible reads it, so leaving
this plugin out removes the two files and nothing more. Its score chart is also the flow page's.

One run at a time per process, like the session's signal policy and the embedder's event relay:
the start line of the next run replaces the view of the last.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from crucible_core.api import hookimpl

if TYPE_CHECKING:  # the view and its renderers load when a loop run starts
    from crucible_core.api import RunContext, RunEnd
    from crucible_results_md.view import ResultsView


class _Current:
    start: Mapping[str, Any] | None = None  # the running session's start line, until its shutdown
    view: ResultsView | None = None  # its page, once a loop run started


_current = _Current()


@hookimpl
def crucible_session_event(event: Mapping[str, Any]) -> None:
    kind = event.get("kind")
    if kind == "row":
        if _current.view is not None:
            _current.view.row(event)
    elif kind == "start":
        _close_view()
        _current.start = event
    elif kind == "shutdown":
        _close_view()
        _current.start = None


def _close_view() -> None:
    if _current.view is not None:
        _current.view.close()
    _current.view = None


@hookimpl
def crucible_run_end(end: RunEnd) -> None:
    if _current.view is not None:
        _current.view.finish()  # the chart owed since its last drawing (view.py)


@hookimpl
def crucible_run_start(context: RunContext) -> None:
    if context.lane != "loop" or _current.start is None:
        return  # a playbook or a plan keeps no RESULTS.md
    from crucible_results_md.view import ResultsView

    _current.view = ResultsView.begin(_current.start, context)
