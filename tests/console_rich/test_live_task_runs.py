"""The live console on a plan's events: its table counts tasks, not iterations."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from crucible_console_rich.live import LiveConsoleReporter, status_table
from tests.cli_support import crucible_in_process
from tests.console.test_console_task_runs import PLAN, events


def test_a_plans_live_table_counts_tasks(tmp_path: Path) -> None:
    (tmp_path / "plan.toml").write_text(PLAN)
    (tmp_path / "ws").mkdir()
    assert (
        crucible_in_process("plan", "run", tmp_path / "plan.toml", "--workspace", tmp_path / "ws").exit_code
        == 4
    )
    log = events(tmp_path / "state" / "session.jsonl")

    # the live table counts tasks, not iterations
    live = LiveConsoleReporter(io.StringIO(), None, console=Console(file=io.StringIO()), auto_refresh=False)
    for event in log[:2]:  # admitted, and build settled
        live.on_event(event)
    live.close()
    out = io.StringIO()
    Console(file=out, force_terminal=True, width=120, color_system=None).print(
        status_table(live.view, log[1]["ts"])
    )
    header, values = out.getvalue().splitlines()[:2]
    assert header.split() == ["tasks", "progress", "settled", "elapsed", "spent"]
    assert values.split()[0] == "1/3" and "1 pass" in values and "$0.25" in values
