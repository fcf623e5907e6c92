"""Where reporters write: a stream that goes quiet when its reader goes away.

A reporter is a view; the run must never end because nobody is watching (`crucible run --ui
jsonl | head`). What it prints goes through `contract.plain_text.plain` first, so nothing an
agent or a measure wrote can drive the operator's terminal.
"""

from __future__ import annotations

import contextlib
import os
from typing import TextIO


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
