"""A candidate's change as a row carries it: the unified diff, bounded, beside git's one-line diffstat.

Pure: a world produces the diff text and the summary (World.describe_change); this decides how
much of the text a row keeps, the same for every world.
"""

from __future__ import annotations

import attrs

from crucible_core.contract.records import value_methods

# The most of a diff one row keeps (UTF-8 bytes). A session-log line is read whole by every
# viewer and every resume, so a runaway diff (a generated file, a vendored tree) is cut here;
# `crucible diff` still shows a kept change in full from the world's memory.
DIFF_CAP_BYTES = 64 * 1024
TRUNCATED_MARKER = "[crucible: diff truncated: {shown} of {total} bytes shown]\n"


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class ChangeEvidence:
    """What a row says of its candidate's change: `diff` (unified, possibly cut) and `diffstat`."""

    diff: str = ""
    diffstat: str = ""


NO_EVIDENCE = ChangeEvidence()


def bounded_diff(diff: str, cap: int = DIFF_CAP_BYTES) -> str:
    """`diff` when it fits in `cap` UTF-8 bytes; else its first whole lines that do, and a marker.

    The cut falls on a line boundary (a reader never sees half a line, or half a character).
    """
    data = diff.encode("utf-8", "surrogatepass")
    if len(data) <= cap:
        return diff
    head = data[:cap]
    cut = head.rfind(b"\n")
    head = head[: cut + 1] if cut >= 0 else b""
    shown = head.decode("utf-8", "ignore")
    return shown + TRUNCATED_MARKER.format(shown=len(head), total=len(data))
