"""crucible-plugin-console-rich: the live console, a table of progress redrawn under the run's lines.

Registered as the reporter "rich" (`--ui rich`), and marked `terminal=True`: that is the reporter
`--ui console` hands a terminal to. Without this distribution a terminal gets the plain lines.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from crucible_core.api import hookimpl

if TYPE_CHECKING:
    from crucible_core.api import Register, Reporter, ReporterContext, ReporterFactory


def live_console(context: ReporterContext) -> Reporter:
    from crucible_console_rich.live import LiveConsoleReporter  # rich loads only when a run shows it

    return LiveConsoleReporter(context.stream, context.iterations)


@hookimpl
def crucible_register_reporters(register: Register[ReporterFactory]) -> None:
    register("rich", live_console, terminal=True)
