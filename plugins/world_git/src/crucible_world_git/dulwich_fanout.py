"""dulwich's pack index loading, with its fan-out table read in one call rather than 256.

dulwich (1.2) reads the 256 entries of an index's fan-out table with one `struct.unpack` each:
about 75 us of the 95 it takes to load a small index here, and a run loads one or two a keep
(the kept record's new pack, a merge's, the workspace's). `install()` puts a reader in its
place that takes the same bytes at the same offset as one big-endian array, and raises the same
`struct.error` for an index too short to hold the table. A dulwich without that method (its
layout changed) is left as it is.
"""

from __future__ import annotations

import struct
from typing import Any

_TABLE = struct.Struct(">256L")
_installed = False
# dulwich's own reader, kept when install() replaced it (a test compares the two).
original: Any = None


def read_fan_out_table(index: Any, start_offset: int) -> list[int]:
    """The 256 cumulative object counts of a pack index's fan-out table at `start_offset`."""
    return list(_TABLE.unpack_from(index._contents, start_offset))


def install() -> None:
    """Replace FilePackIndex._read_fan_out_table by read_fan_out_table (once per process)."""
    global _installed, original
    if _installed:
        return
    _installed = True
    from dulwich.pack import FilePackIndex

    original = getattr(FilePackIndex, "_read_fan_out_table", None)
    if callable(original):
        FilePackIndex._read_fan_out_table = read_fan_out_table  # type: ignore[method-assign,assignment]
