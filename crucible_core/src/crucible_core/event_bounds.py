"""Bounds on what an agent event carries into the session log: long text and large values are clipped.

The log is read by people and viewers; a whole file written by a tool call, or a megabyte of
command output, belongs in the workspace, not in every event. Harness plugins clip what their
agent CLI reports with these before emitting it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

MAX_FIELD_CHARS = 4000
MAX_ITEMS = 200  # keys of a mapping, items of a list: more is not a value anyone reads in a log


def clip(text: str, limit: int = MAX_FIELD_CHARS) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... [{len(text) - limit} more characters]"


def clip_value(value: Any, limit: int = MAX_FIELD_CHARS) -> Any:
    """Clip every string in a JSON-like value; a value too large as a whole becomes its clipped JSON."""
    if isinstance(value, str):
        return clip(value, limit)
    if isinstance(value, Mapping):
        clipped = {str(k): clip_value(v, limit) for k, v in list(value.items())[:MAX_ITEMS]}
        encoded = json.dumps(clipped, default=str)
        return clipped if len(encoded) <= 4 * limit else clip(encoded, limit)
    if isinstance(value, list | tuple):
        return [clip_value(v, limit) for v in value[:MAX_ITEMS]]
    return value
