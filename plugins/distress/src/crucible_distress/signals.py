"""This plugin's AgentSignals: the loop's safe points read the distress directory and ESCALATION.json here.

The distress directory is the run's state directory's `distress/` (RunPaths.distress_dir), named
to every turn in $CRUCIBLE_DISTRESS_DIR; ESCALATION.json sits in the workspace. Both are written
by the agent, so each is read as hostile input (pages.py, escalation.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from crucible_core.api import AfterTurn, AgentFileRefused, AgentNote, DirectoryWatch, SignalContext, Suspend
from crucible_distress import escalation, pages

METHOD_TEXT = """\
If the objective cannot be reached as specified,
run `crucible escalate --category infeasible --reason ... --evidence ...` and end your turn.
If the run cannot go on without a human (the same environment failure every turn, a missing
tool or permission), run `crucible distress --severity error --reason ... --evidence ...`
and end your turn: the run waits for a human. `--severity warn` or `info` only leaves a note.
"""


class DistressSignals:
    handle = pages.HANDLE
    phase = "distressed"

    def __init__(self) -> None:
        # One per look, by the directory looked in: after a look that found nothing, the next
        # is one stat of the directory while none of its entries changed (the usual turn).
        self._watches: dict[str, DirectoryWatch] = {}

    def _watch(self, look: str, directory: Path) -> DirectoryWatch:
        watch = self._watches.get(look)
        if watch is None or watch.directory != directory:
            watch = self._watches[look] = DirectoryWatch(directory)
        return watch

    def method_text(self) -> str:
        return METHOD_TEXT

    def env(self, context: SignalContext) -> Mapping[str, str]:
        return {pages.ENV_DIR: str(context.paths.distress_dir)}

    def after_turn(self, context: SignalContext) -> AfterTurn:
        """The warn/info notes, then an escalation (consumed, its redacted copy kept in the state dir)."""
        paths = context.paths
        trouble: tuple[str, ...] = ()
        notes: tuple[AgentNote, ...] = ()
        watch = self._watch("notes", paths.distress_dir)
        stamp = watch.stamp()
        if not watch.unchanged(stamp):
            try:
                notes = tuple(pages.take_notes(paths.distress_dir))
            except (OSError, AgentFileRefused) as exc:
                trouble = (f"could not read the agent's distress notes: {exc}",)
            else:
                if not notes:  # none there, or a file of none consumed (the directory changed)
                    watch.found_nothing(stamp)
        escalated = None
        watch = self._watch("escalation", paths.escalation_file.parent)
        stamp = watch.stamp()
        if not watch.unchanged(stamp):
            escalated = escalation.take_marker(
                paths.escalation_file, paths.state_dir / escalation.MARKER_NAME, context.redact
            )
            if escalated is None:
                watch.found_nothing(stamp)
        return AfterTurn(notes, escalated, trouble)

    def suspend(self, context: SignalContext) -> Suspend | None:
        """A marker suspends the run; it stays in the state directory until a human answers, so
        it is rewritten through the run's redaction first."""
        directory = context.paths.distress_dir
        watch = self._watch("marker", directory)
        stamp = watch.stamp()
        if watch.unchanged(stamp):
            return None
        record = pages.read_marker(directory)
        if record is None:
            watch.found_nothing(stamp)
            return None
        pages.redact_marker(directory, context.redact)
        return Suspend(str(record.get("reason") or ""), str(pages.marker_path(directory)))

    def held(self, context: SignalContext) -> bool:
        return pages.read_marker(context.paths.distress_dir) is not None

    def answer(self, context: SignalContext) -> None:
        pages.marker_path(context.paths.distress_dir).unlink(missing_ok=True)
