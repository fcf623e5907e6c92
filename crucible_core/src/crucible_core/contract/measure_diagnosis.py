"""Why a measure gave no valid reading, in words: for `crucible check` and for a run stopped at its baseline."""

from __future__ import annotations

import re

from crucible_core.contract.plain_text import plain
from crucible_core.contract.reading import Reading

# Shell conventions for exit codes a measure author may not recognise.
_EXIT_MEANINGS = {
    126: "the command was found but could not be executed (is it executable? does its #! line name a real interpreter?)",
    127: "command not found: the script or a program it runs is missing (is the path right, and is it injected into the workspace?)",
}
_EXITED = re.compile(r"exited (-?\d+)")
STDERR_TAIL_LINES = 3
STDERR_LINE_CHARS = 200


def exit_meaning(code: int) -> str:
    """A sentence for an exit code worth explaining, or an empty string."""
    if code < 0:
        return f"killed by signal {-code}"
    if 128 < code < 128 + 65:
        return f"probably killed by signal {code - 128}"
    return _EXIT_MEANINGS.get(code, "")


def stderr_tail(stderr: str) -> str:
    """The last few non-empty stderr lines, bounded and printable, joined on one line."""
    lines = [line.strip() for line in stderr.strip().splitlines() if line.strip()]
    # measure output is hostile input: never let it drive the operator's terminal
    return " | ".join(plain(line)[:STDERR_LINE_CHARS] for line in lines[-STDERR_TAIL_LINES:])


def explain_invalid(reading: Reading) -> str:
    """The reading's note, with what its exit code means when the note names one."""
    why = reading.note or "valid is false"
    match = _EXITED.search(why)
    meaning = exit_meaning(int(match.group(1))) if match else ""
    return f"{why}; exit {match.group(1)}: {meaning}" if match and meaning else why


def baseline_failure(reading: Reading) -> str:
    """The one line a run prints when its baseline measure gave no valid reading."""
    return f"the baseline measure gave no valid reading ({explain_invalid(reading)})"
