"""TOML text from plain data, for the files crucible generates (compiled workflows, plans, applied packs).

tomllib only reads. What crucible writes is data tomllib produced or data of the same shapes:
strings, numbers, booleans, dates, arrays and tables. Top-level tables become `[name]`
sections, arrays of tables `[[name]]` blocks; anything deeper is written inline, which TOML
reads back as the same value.
"""

from __future__ import annotations

import datetime
import json
import math
from collections.abc import Mapping
from typing import Any


def _key(name: str) -> str:
    bare = name and all(ch.isascii() and (ch.isalnum() or ch in "-_") for ch in name)
    return name if bare else json.dumps(name)


def value(item: Any) -> str:
    """One TOML value, inline."""
    if isinstance(item, bool):
        return "true" if item else "false"
    if isinstance(item, int):
        return str(item)
    if isinstance(item, float):
        if math.isnan(item):
            return "nan"
        if math.isinf(item):
            return "inf" if item > 0 else "-inf"
        return repr(item)
    if isinstance(item, datetime.date | datetime.time):
        return item.isoformat()
    if isinstance(item, list | tuple):
        return "[" + ", ".join(value(v) for v in item) + "]"
    if isinstance(item, Mapping):
        return "{" + ", ".join(f"{_key(str(k))} = {value(v)}" for k, v in item.items()) + "}"
    return json.dumps(str(item))  # a TOML basic string is a JSON string for every character


def _is_table_array(item: Any) -> bool:
    return isinstance(item, list) and bool(item) and all(isinstance(v, Mapping) for v in item)


def document(data: Mapping[str, Any]) -> str:
    """A whole document: top-level keys first, then one section per table and table array."""
    lines = [f"{_key(k)} = {value(v)}" for k, v in data.items() if not _is_section(v)]
    for name, item in data.items():
        if isinstance(item, Mapping):
            lines += ["", f"[{_key(name)}]"] + [f"{_key(str(k))} = {value(v)}" for k, v in item.items()]
        elif _is_table_array(item):
            for entry in item:
                lines += ["", f"[[{_key(name)}]]"] + [
                    f"{_key(str(k))} = {value(v)}" for k, v in entry.items()
                ]
    return "\n".join(lines).lstrip("\n") + "\n"


def _is_section(item: Any) -> bool:
    return isinstance(item, Mapping) or _is_table_array(item)
