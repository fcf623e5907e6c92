"""The one cattrs converter for manifests: unknown keys are errors, messages name the key path."""

from __future__ import annotations

import re
from typing import Any

import cattrs
from cattrs.errors import ClassValidationError, ForbiddenExtraKeysError

from crucible_core.contract import Direction
from crucible_core.manifest.models import InjectEntry

converter = cattrs.Converter(forbid_extra_keys=True)


def _structure_inject(value: Any, _type: Any) -> str | InjectEntry:
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return converter.structure(value, InjectEntry)
    raise TypeError(f"an inject entry must be a string or a table, not {type(value).__name__}")


converter.register_structure_hook(str | InjectEntry, _structure_inject)


def _strict_str(value: Any, _type: Any) -> str:
    # cattrs would turn 5 into "5"; a manifest that says `goal = 5` is a mistake worth naming.
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {type(value).__name__} {value!r}")
    return value


def _strict_bool(value: Any, _type: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"expected true or false, got {value!r}")
    return value


def _strict_float(value: Any, _type: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"expected a number, got {value!r}")
    return float(value)


def _strict_int(value: Any, _type: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"expected an integer, got {value!r}")
    return value


def _direction(value: Any, _type: Any) -> Direction:
    if not isinstance(value, str) or value not in Direction.__members__.values():
        raise ValueError(f"{value!r} is not one of lower, higher")
    return Direction(value)


# Registered before the str hook: Direction is a str subclass and would otherwise match it.
converter.register_structure_hook(Direction, _direction)
converter.register_structure_hook(str, _strict_str)
converter.register_structure_hook(bool, _strict_bool)
converter.register_structure_hook(float, _strict_float)
converter.register_structure_hook(int, _strict_int)


def _key_path(path: str) -> str:
    """`$.judge.selftest.runs` -> `[judge.selftest].runs`; `$.workspace.inject[2].src` stays readable."""
    path = path.removeprefix("$").lstrip(".")
    if not path:
        return "(top level)"
    parts = re.findall(r"[^.\[\]]+|\[\d+\]", path)
    tables: list[str] = []
    for i, part in enumerate(parts):
        if part.startswith("[") or i == len(parts) - 1:
            rest = "".join(p if p.startswith("[") else f".{p}" for p in parts[i:]).lstrip(".")
            return f"[{'.'.join(tables)}].{rest}" if tables else rest
        tables.append(part)
    return f"[{'.'.join(tables)}]"


def describe_structure_error(exc: Exception) -> list[str]:
    """Render a cattrs failure as one message per problem, each naming its key path."""
    messages: list[str] = []

    def walk(error: BaseException, path: str) -> None:
        if isinstance(error, ForbiddenExtraKeysError):
            keys = ", ".join(sorted(error.extra_fields))
            table = path.removeprefix("$").lstrip(".")
            messages.append(f"unknown key(s) {keys} in {f'[{table}]' if table else 'the top level'}")
            return
        if isinstance(error, ClassValidationError | cattrs.errors.IterableValidationError):
            for sub in error.exceptions:
                note = getattr(sub, "__notes__", None) or []
                sub_path = path
                for n in note:
                    name = getattr(n, "name", None)
                    index = getattr(n, "index", None)
                    if name is not None:
                        sub_path = f"{path}.{name}"
                    elif index is not None:
                        sub_path = f"{path}[{index}]"
                walk(sub, sub_path)
            return
        if isinstance(error, KeyError):
            messages.append(f"{_key_path(path)} is required")
            return
        text = str(error)
        messages.append(f"{_key_path(path)}: {text}")

    walk(exc, "$")
    return messages or [str(exc)]
