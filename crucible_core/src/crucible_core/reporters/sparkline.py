"""A one-line sparkline of a series of scores, for the console's end summary."""

from __future__ import annotations

from collections.abc import Sequence

BLOCKS = "▁▂▃▄▅▆▇█"
ASCII_BLOCKS = "_.-~=+*#"  # for a terminal whose encoding has no block characters
GAP = " "  # a point with no value (no valid best yet)


def _buckets(values: Sequence[float | None], width: int) -> list[float | None]:
    """At most `width` points: each the last value of its stretch of the series.

    The series is a running best, so the last value of a stretch is the best at its end.
    """
    if len(values) <= width:
        return list(values)
    out: list[float | None] = []
    for slot in range(width):
        end = (slot + 1) * len(values) // width
        out.append(values[end - 1])
    return out


def sparkline(values: Sequence[float | None], *, width: int = 40, ascii_only: bool = False) -> str:
    """`values` drawn as block characters, lowest to highest; a None is a blank.

    A flat series draws at the lowest block, so a run that never improved reads as flat.
    """
    blocks = ASCII_BLOCKS if ascii_only else BLOCKS
    points = _buckets(values, max(1, width))
    known = [v for v in points if v is not None]
    if not known:
        return ""
    low, high = min(known), max(known)
    span = high - low
    top = len(blocks) - 1
    chars = []
    for value in points:
        if value is None:
            chars.append(GAP)
        elif span == 0:
            chars.append(blocks[0])
        else:
            chars.append(blocks[round((value - low) / span * top)])
    return "".join(chars)
