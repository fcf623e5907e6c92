"""Where reporters write: a terminal-safe text filter, and a stream that goes quiet when its reader goes away.

A reporter is a view; the run must never end because nobody is watching (`crucible run --ui
jsonl | head`), and nothing an agent or a measure wrote may drive the operator's terminal.
"""

from __future__ import annotations

import contextlib
import os
import re
from typing import TextIO

# Escape sequences as a whole (CSI, OSC up to its terminator, other two-byte escapes), then any
# control character left over: C0 and DEL, C1, and the bidirectional overrides that can make
# a line read differently from what it holds.
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]?")
_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def plain(text: object) -> str:
    """`text` with escape sequences removed and every other control character turned into a space."""
    return _CONTROLS.sub(" ", _ESCAPES.sub("", str(text)))


class QuietOnClose:
    """Writes lines to a stream until the reader is gone; after that, silently nothing.

    On a broken pipe the stream's descriptor is pointed at /dev/null, so the interpreter's
    final flush at exit cannot fail either.
    """

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.closed = False

    def line(self, text: str) -> None:
        if self.closed:
            return
        try:
            self.stream.write(text + "\n")
            self.stream.flush()
        except (OSError, ValueError):  # BrokenPipeError, EIO on a dead terminal, a closed file
            self._go_quiet()

    def flush(self) -> None:
        if not self.closed:
            try:
                self.stream.flush()
            except (OSError, ValueError):
                self._go_quiet()

    def _go_quiet(self) -> None:
        self.closed = True
        with contextlib.suppress(OSError, ValueError, AttributeError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self.stream.fileno())
            os.close(devnull)
