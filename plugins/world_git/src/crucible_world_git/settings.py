"""The command world's manifest keys ([world] apply/snapshot/restore commands), validated by crucible core."""

from __future__ import annotations

import attrs


@attrs.frozen
class CommandWorldSettings:
    """[world] for the `command` world: domain commands layered on git reversibility."""

    apply_cmd: str | None = None  # makes the candidate live before it is measured
    snapshot_cmd: str | None = None  # prints a token naming the domain state it saved
    restore_cmd: str | None = None  # brings back the state named by $CRUCIBLE_TOKEN

    def __attrs_post_init__(self) -> None:
        if (self.snapshot_cmd is None) != (self.restore_cmd is None):
            raise ValueError("snapshot_cmd and restore_cmd must come as a pair")
