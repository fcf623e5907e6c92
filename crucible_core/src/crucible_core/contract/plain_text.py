"""Agent and measure text made safe to print or to commit: one filter for every terminal line and commit message.

A note, a reason or a file name the agent chose can carry escape sequences (retitle, clear or
recolour the operator's terminal), bidirectional overrides (a line that reads differently from
what it holds) and lone surrogates (a str no UTF-8 writer accepts). Everything the engine prints
or puts into a commit message goes through `plain` first.
"""

from __future__ import annotations

import functools
import re

# Escape sequences as a whole (CSI, OSC up to its terminator, other two-byte escapes), then any
# control character left over: C0 and DEL, C1, line and paragraph separators, and the invisible
# format characters that reorder or hide text (bidirectional marks, overrides and isolates,
# zero-width characters, the byte-order mark).
# Each expression is compiled at its first use: most text is printable ASCII, which holds nothing
# any of them matches, and compiling the classes beyond ASCII cost every start about a millisecond.
_ESCAPES = r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]?"
_BEYOND_C0 = r"\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff"
_CONTROLS = rf"[\x00-\x1f{_BEYOND_C0}]"
_CONTROLS_BUT_TAB = rf"[\x00-\x08\x0a-\x1f{_BEYOND_C0}]"
_LONE_SURROGATES = "[\ud800-\udfff]"
REPLACEMENT = "\ufffd"


@functools.cache
def _compiled(source: str) -> re.Pattern[str]:
    return re.compile(source)


def valid_text(text: str) -> str:
    """`text` with every lone surrogate replaced by U+FFFD, so it can always be written as UTF-8."""
    if text.isascii():
        return text
    return _compiled(_LONE_SURROGATES).sub(REPLACEMENT, text)


def plain(text: object, *, tabs: bool = False) -> str:
    """`text` with escape sequences removed and every other control character turned into a space.

    `tabs=True` keeps tab characters (a diff's content); line breaks never survive, so a caller
    that prints several lines filters each line.
    """
    value = str(text)
    # Printable ASCII holds no escape (ESC is a control), no control and no surrogate.
    if value.isascii() and value.isprintable():
        return value
    controls = _compiled(_CONTROLS_BUT_TAB if tabs else _CONTROLS)
    return valid_text(controls.sub(" ", _compiled(_ESCAPES).sub("", value)))
