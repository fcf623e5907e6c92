"""`[search]`, the wide round's settings table: converted strictly by core, checked here (docs/search.md).

Registration imports this module, so it loads nothing of core's manifest models (`crucible plugins`).
"""

from __future__ import annotations

import attrs

import crucible_search_wide
from crucible_core.api import Capability

SEARCH_POLICIES = ("top-k", "halving")
MAX_WIDE = 32  # [search].wide: each candidate is a concurrent agent turn and a worktree
WIDE_DIR = crucible_search_wide.WIDE_DIR


@attrs.frozen
class SearchSettings:
    """[search]: a wide round of parallel proposals before the deep loop (docs/search.md)."""

    wide: int = 0  # N isolated propose turns at once; 0 skips the wide round
    approaches: tuple[str, ...] = ()  # one per candidate slot, biased into its prompt
    policy: str = "top-k"  # how the measured candidates are ranked: "top-k" or "halving"
    policy_k: int = 1  # how many winners seed the deep loop
    # What each proposal needs ("gpu"): run here when `--cap` declares it, else by a task runner
    # that serves it (a [deploy] profile's cluster); None: proposals run here.
    needs: Capability | None = None

    def __attrs_post_init__(self) -> None:
        problem = search_problem(self.wide, self.policy_k, len(self.approaches), "[search].wide")
        if problem:
            raise ValueError(f"{problem} (see docs/search.md#wide-rounds)")
        for index, approach in enumerate(self.approaches):
            if not approach.strip():
                raise ValueError(f"[search].approaches[{index}] is empty")
        if self.policy not in SEARCH_POLICIES:
            from crucible_core.api import show

            raise ValueError(
                f"[search].policy must be one of {', '.join(SEARCH_POLICIES)} (got {show(self.policy)})"
            )


def search_problem(
    wide: int, keep: int, approaches: int, wide_key: str, keep_key: str = "[search].policy_k"
) -> str:
    """Why a wide round of `wide` candidates keeping `keep` cannot run, or "" when it can.

    Shared by the manifest check and the `--wide` / `--wide-keep` overrides, which name
    themselves as the key at fault.
    """
    from crucible_core.api import show

    if not 0 <= wide <= MAX_WIDE:
        return f"{wide_key} must be between 0 and {MAX_WIDE} (got {show(wide)})"
    if wide == 0:
        return ""
    if approaches < wide:
        return (
            f"{wide_key} = {wide} needs at least {wide} [search].approaches, one per candidate "
            f"(the manifest lists {approaches}): diversity is written down, not generated"
        )
    if not 1 <= keep <= wide:
        return f"{keep_key} must be between 1 and {wide_key} ({wide}) (got {show(keep)})"
    return ""
