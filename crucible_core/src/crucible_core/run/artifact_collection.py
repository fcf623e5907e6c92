"""The run's declared artifacts, collected after each keep and at run end, and logged when they changed.

Collection reads the agent's tree (crucible_core/artifacts.py says how carefully); this is the
run's side of it: where the copies are staged (the private state directory), which redaction
applies, and one `artifacts` event per collection that differs from the one before, so a run
whose artifacts do not move writes no line per keep.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from crucible_core.contract import wire

# The collector itself loads with the first collection: a run that declares no artifact never has one.
if TYPE_CHECKING:
    from crucible_core.artifacts import Collected, Declared

STAGE_DIR_NAME = "artifacts"  # under the run's private directory


class ArtifactCollection:
    def __init__(
        self,
        workspace: Path,
        declared: Sequence[Declared],
        private_dir: Path,
        *,
        redact: Callable[[str], str],
        emit: Callable[[wire.Event], object],
        note: Callable[[str], None],
    ) -> None:
        self.workspace = workspace
        self.declared = tuple(declared)
        self.stage_dir = private_dir / STAGE_DIR_NAME
        self.redact = redact
        self.emit = emit
        self.note = note
        self._logged: tuple[tuple[str, str, str, str, str], ...] | None = None

    def collect(self, iteration: int) -> Collected | None:
        """The declared artifacts as they stand now; None when none are declared or the
        collection itself failed (noted: publishing goes on without them, the run too)."""
        if not self.declared:
            return None
        from crucible_core.artifacts import collect_artifacts, to_wire

        try:
            collected = collect_artifacts(
                self.workspace, self.declared, redact=self.redact, stage_dir=self.stage_dir
            )
        except OSError as exc:
            self.note(f"collecting the declared artifacts failed: {exc}")
            return None
        key = tuple((item.source, item.mode, item.status, item.name, item.digest) for item in collected.items)
        if key != self._logged:
            self.emit(to_wire(collected, iteration))
            self._logged = key
        return collected
