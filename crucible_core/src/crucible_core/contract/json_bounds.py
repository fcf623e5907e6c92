"""Parsing JSON text that a hostile party wrote: bounded in length, nesting and integer size, never raising past ValueError."""

from __future__ import annotations

import json
from typing import Any

from crucible_core.contract.plain_text import valid_text

MAX_INT_DIGITS = 300  # beyond the float range already; int("9" * 5000) would raise anyway


class JsonRefused(ValueError):
    """The text is not JSON we are willing to parse; the message says why, in a few words."""


def nesting_depth(text: str) -> int:
    """The deepest bracket nesting of a JSON text, strings skipped (one pass, no recursion)."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def _bounded_int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        raise JsonRefused(f"an integer of {digits} digits (at most {MAX_INT_DIGITS})")
    return int(text)


def loads_bounded(text: str | bytes, *, max_chars: int, max_depth: int) -> Any:
    """json.loads with bounds checked first; every failure is a JsonRefused with a short reason."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            raise JsonRefused("the text is not UTF-8") from None
    if len(text) > max_chars:
        raise JsonRefused(f"{len(text)} characters long (at most {max_chars})")
    if nesting_depth(text) > max_depth:
        raise JsonRefused(f"nests deeper than {max_depth} levels")
    try:
        value = json.loads(text, parse_int=_bounded_int)
    except JsonRefused:
        raise
    except json.JSONDecodeError as exc:
        raise JsonRefused(f"not valid JSON: {exc.msg} at column {exc.colno}") from None
    except (
        ValueError,
        RecursionError,
    ) as exc:  # belt and braces: the checks above should make these unreachable
        raise JsonRefused(f"could not be parsed ({type(exc).__name__})") from None
    if "\\u" in text and _holds_lone_surrogate(value):
        # json.loads turns a "\\ud800" escape into a str that no UTF-8 writer accepts: a note
        # or reason carrying it would crash every later write of the log, so refuse it here.
        raise JsonRefused("holds a lone surrogate escape (not valid text)")
    return value


def _holds_lone_surrogate(value: Any) -> bool:
    """True when a string anywhere in `value` (keys included) cannot be encoded as UTF-8."""
    pending = [value]
    while pending:  # iterative: the depth is bounded already, but no recursion is cheaper still
        item = pending.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return True
        elif isinstance(item, dict):
            pending.extend(item.keys())
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return False


def without_lone_surrogates(value: Any) -> Any:
    """`value` with every lone surrogate in its strings (keys included) replaced by U+FFFD."""
    if isinstance(value, str):
        return valid_text(value)
    if isinstance(value, dict):
        return {without_lone_surrogates(k): without_lone_surrogates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [without_lone_surrogates(item) for item in value]
    return value


def loads_valid_text(raw: str | bytes) -> Any:
    """json.loads of a line the engine wrote itself (session log, ledger), its strings always valid text.

    A log written before lone surrogates were refused may hold a `"\\ud800"` escape; decoded
    as is, that string would crash every later print or write of it. Raises what json.loads
    raises (ValueError, RecursionError); only a line holding a surrogate escape is walked.
    """
    text = raw.decode("utf-8") if isinstance(raw, bytes) else raw  # UnicodeDecodeError is a ValueError
    value = json.loads(text)
    return without_lone_surrogates(value) if "\\ud" in text or "\\uD" in text else value
