"""The measure contract: the Reading a judge produces and how a measure command's stdout becomes one."""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from typing import Any

import attrs

from crucible_core.contract.json_bounds import JsonRefused, loads_bounded
from crucible_core.contract.records import value_methods


class Direction(enum.StrEnum):
    LOWER = "lower"
    HIGHER = "higher"


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class Reading:
    """One measurement of one candidate. `score is None` means unscoreable."""

    valid: bool
    score: float | None = None
    tiebreak: float | None = None
    solved: bool = False
    note: str = ""
    detail: Mapping[str, Any] | None = None
    # The measurement itself failed (it hung, could not start, or broke the output contract),
    # as opposed to a candidate the measure judged invalid. Not on the wire; `check` fails on it.
    broken: bool = False
    # Every score when the engine measured the candidate more than once ([judge].repeats);
    # `score` is then their statistic. Written on the row as `samples`.
    samples: tuple[float, ...] = ()

    @classmethod
    def invalid(cls, note: str, *, broken: bool = False) -> Reading:
        return cls(valid=False, note=note, broken=broken)

    @property
    def scoreable(self) -> bool:
        return self.valid and self.score is not None

    def to_wire(self) -> dict[str, Any]:
        return {
            "valid": self.valid,
            "score": self.score,
            "tiebreak": self.tiebreak,
            "solved": self.solved,
            "note": self.note,
            "detail": dict(self.detail) if self.detail is not None else None,
        }


# A verdict is one short JSON line; anything beyond these bounds is refused before (or while)
# it is parsed, so hostile output cannot exhaust the parser, the stack or int conversion.
MAX_VERDICT_CHARS = 64 * 1024
MAX_VERDICT_DEPTH = 32


def _number(value: Any) -> float | None:
    # bool is an int subclass; a JSON `true` score is a domain bug, not the number 1.
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:  # an integer beyond the float range
        return None
    return number if math.isfinite(number) else None


def _describe(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:20]}...({len(text)} characters)"


def parse_measure_output(stdout: str, exit_code: int) -> Reading:
    """Turn a measure command's stdout and exit code into a Reading, never raising.

    The last line starting with `{` is the verdict; a nonzero exit forces valid=false.
    Garbage, silence and wrong types become an invalid reading whose note says why.
    """
    verdict_line = None
    for line in reversed(stdout.splitlines()):
        if line.lstrip().startswith("{"):
            verdict_line = line.strip()
            break
    if verdict_line is None:
        note = "measure printed no JSON verdict line"
        if exit_code != 0:
            note += f" and exited {exit_code}"
        return Reading.invalid(note, broken=True)
    try:
        data = loads_bounded(verdict_line, max_chars=MAX_VERDICT_CHARS, max_depth=MAX_VERDICT_DEPTH)
    except JsonRefused as exc:
        return Reading.invalid(f"measure verdict refused: {exc}", broken=True)
    if not isinstance(data, dict):
        return Reading.invalid("measure verdict is not a JSON object", broken=True)
    if "valid" not in data:
        return Reading.invalid('measure verdict lacks the required boolean "valid"', broken=True)
    valid = data["valid"]
    if not isinstance(valid, bool):
        return Reading.invalid(
            f'measure verdict\'s "valid" must be true or false, not {_describe(valid)}', broken=True
        )
    raw_score = data.get("score")
    score = _number(raw_score)
    raw_note = data.get("note")
    note = raw_note if isinstance(raw_note, str) else ""
    if raw_score is not None and score is None:
        note = f"score {_describe(raw_score)} is not a finite number; {note}".rstrip("; ")
    solved = data.get("solved") is True
    detail = data.get("detail")
    detail = detail if isinstance(detail, dict) else None
    raw_tiebreak = data.get("tiebreak")
    tiebreak = _number(raw_tiebreak)
    if raw_tiebreak is not None and tiebreak is None:
        note = f"tiebreak {_describe(raw_tiebreak)} is not a finite number; {note}".rstrip("; ")
        valid = False
    if exit_code != 0:
        note = f"measure exited {exit_code}; {note}".rstrip("; ")
        valid = False
    if score is None and raw_score is None and valid:
        # says valid, but a scored judge has nothing to compare: the verdict broke the contract
        note = f'measure verdict says "valid": true but has no "score"; {note}'.rstrip("; ")
        return Reading(valid=False, tiebreak=tiebreak, solved=solved, note=note, detail=detail, broken=True)
    if score is None:
        valid = False
    return Reading(valid=valid, score=score, tiebreak=tiebreak, solved=solved, note=note, detail=detail)
