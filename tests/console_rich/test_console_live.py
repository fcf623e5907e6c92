"""The live console (rich), rendered to a forced terminal in memory, and when it is chosen."""

from __future__ import annotations

import io
import os
import subprocess
import sys

from rich.console import Console

from crucible_console_rich.live import LiveConsoleReporter, status_table
from crucible_core.contract import wire
from crucible_core.plugins import load_plugins
from crucible_core.reporters.console import ConsoleReporter, HeadlessReporter
from crucible_core.reporters.console_view import ConsoleView
from crucible_core.session.shell import make_reporter
from tests.cli_support import crucible_env
from tests.console.test_console_lines import T0, a_run, budget, phase, row, start


def terminal() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=True, width=120, color_system=None), out


def table_text(view: ConsoleView, at: float) -> str:
    console, out = terminal()
    console.print(status_table(view, at))
    return out.getvalue()


def folded(events: list[dict]) -> ConsoleView:
    view = ConsoleView(total=None)
    for event in events:
        line = wire.from_object(event)
        assert line is not None
        view.apply(line, 0.0)
    return view


def test_the_live_table_shows_progress_best_elapsed_and_eta() -> None:
    events = [start(T0, 10), row(T0 + 1, 0, "baseline", 4, 4, baseline=4), budget(T0 + 1, 1.0, 10)]
    events += [phase(T0 + 1, "iteration", 1)]
    for it in (1, 2, 3):
        ts = T0 + 1 + 20 * it
        events += [row(ts, it, "keep", 4 + it, 4 + it, baseline=4), budget(ts, 1.0 + 20 * it, 10, done=it)]
        events += [phase(ts, "iteration", it + 1)]
    events += [{"v": 1, "ts": T0 + 65, "kind": "step", "step": "measure", "iter": 4}]
    text = table_text(folded(events), T0 + 66)
    header, values = text.splitlines()[:2]
    for name in ("iteration", "progress", "best", "kept", "elapsed", "ETA", "spent"):
        assert name in header
    assert "4/10 measure" in values
    assert "7 (baseline 4, +75.0%)" in values
    assert "3 of 3" in values
    assert "1m06s" in values  # 61 s active at the last budget event, 5 s since
    assert "2m15s" in values  # 7 iterations left at 20 s each, 5 s into the first of them
    assert "━" in values  # the progress bar


def test_a_pause_shows_in_the_table_and_stops_its_clock() -> None:
    events = [start(T0, 10), row(T0 + 1, 0, "baseline", 4, 4), budget(T0 + 1, 1.0, 10)]
    events += [phase(T0 + 2, "paused", 0)]
    text = table_text(folded(events), T0 + 500)
    assert "0/10 paused" in text and "2.0s" in text


def test_the_live_reporter_prints_the_lines_above_the_table_and_ends_with_the_summary() -> None:
    console, out = terminal()
    reporter = LiveConsoleReporter(io.StringIO(), 40, clock=lambda: T0, console=console, auto_refresh=False)
    for event in a_run():
        reporter.on_event(event)
    reporter.close()
    text = out.getvalue()
    assert (
        "iter  3/40 invalid  score -          best 2          value.txt does not hold a whole number" in text
    )
    assert "[ 1m01s] budget set by the operator: 12 iterations" in text
    assert "iter 12/12 keep" in text
    assert "best by iteration  ▁▂▂▂▂▃▄▅▅▆▇▇█  0 → 10" in text
    assert text.rstrip().endswith("run ended: finished (iterations spent (12))")
    assert "ETA" in text  # the live table was drawn while the run went on


def test_markup_in_a_note_is_shown_as_text() -> None:
    console, out = terminal()
    reporter = LiveConsoleReporter(io.StringIO(), 3, clock=lambda: T0, console=console, auto_refresh=False)
    reporter.on_event(start(T0, 3))
    reporter.on_event(row(T0 + 1, 0, "baseline", 0, 0, note="[bold red]x[/] \x1b[2J"))
    reporter.close()
    assert "[bold red]x[/]" in out.getvalue() and "\x1b[2J" not in out.getvalue()


def test_the_live_console_is_chosen_only_on_a_terminal() -> None:
    plugins = load_plugins()
    assert type(make_reporter(plugins, "console", 3, io.StringIO())) is ConsoleReporter
    leader, follower = os.openpty()
    try:
        with open(follower, "w", closefd=False) as tty:
            chosen = make_reporter(plugins, "console", 3, tty)
            assert isinstance(chosen, LiveConsoleReporter)
            chosen.close()
            assert type(make_reporter(plugins, "headless", 3, tty)) is HeadlessReporter
            asked = make_reporter(plugins, "rich", 3, tty)  # --ui rich: asked for by name
            assert isinstance(asked, LiveConsoleReporter)
            asked.close()
    finally:
        os.close(leader)
        os.close(follower)


def test_crucible_help_and_loading_the_reporters_never_import_rich() -> None:
    code = (
        "import sys\n"
        "from crucible_core.cli.main import cli\n"
        "from crucible_core.plugins import load_plugins\n"
        "load_plugins().registry('reporter')\n"
        "try:\n"
        "    cli.main(['--help'], standalone_mode=False)\n"
        "except SystemExit:\n"
        "    pass\n"
        "print('rich' in sys.modules, file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=crucible_env())
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip() == "False"
