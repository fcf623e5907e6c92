"""The one cattrs converter for manifests: strict types, unknown keys are errors, messages name the key path.

Every hook checks the TOML type itself before cattrs sees the value, so a refusal reads
"[workspace].carry_forward must be an array of strings, not a string" instead of Python's
own wording, and a string is never iterated as a list of characters.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable
from typing import Any

import attrs
import cattrs
import cattrs.gen
from cattrs.errors import ClassValidationError, ForbiddenExtraKeysError, IterableValidationError

from crucible_core.contract.noise import Margin, MarginError, Statistic, parse_margin
from crucible_core.contract.reading import Direction
from crucible_core.durations import DURATION_FORMS, duration_problem, duration_seconds
from crucible_core.manifest.broker_sections import FixedTarget, OpenTarget
from crucible_core.manifest.models import (
    Capability,
    InjectEntry,
    Manifest,
    PreflightRung,
    Seconds,
)

converter = cattrs.Converter(forbid_extra_keys=True)

# No manifest string needs to be longer; a longer one is a mistake or an attack on memory.
MAX_STRING_CHARS = 1_000_000


class ManifestValueError(ValueError):
    """A value of the wrong type or out of range; the message says what is expected."""


@attrs.frozen(slots=False)
class _At(Exception):
    """A failure inside an array element (`[2]`) or a table entry (`.FOO`)."""

    step: str
    error: BaseException


def show(value: Any) -> str:
    """A short, bounded description of a TOML value for an error message (never a deep repr)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        text = value if len(value) <= 40 else value[:40] + "..."
        return f"the string {text!r}"
    if isinstance(value, int):
        # str() of a huge int raises (Python caps int-to-text conversion); count bits instead
        return (
            str(value)
            if abs(value) < 10**30
            else f"an integer of about {int(value.bit_length() * 0.30103) + 1} digits"
        )
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "a table"
    return f"a {type(value).__name__} value"


def _structure_target(value: Any, _type: Any) -> FixedTarget | OpenTarget | None:
    # `target = { fixed = "..." }` or `target = { open = { scope = "...", param = "..." } }`
    if value is None:
        return None
    if isinstance(value, dict) and set(value) == {"fixed"}:
        return converter.structure(value, FixedTarget)
    if isinstance(value, dict) and set(value) == {"open"}:
        return converter.structure(value, OpenTarget)
    raise ManifestValueError('a target is { fixed = "..." } or { open = { scope = "...", param = "..." } }')


converter.register_structure_hook(FixedTarget | OpenTarget | None, _structure_target)


def _strict_str(value: Any, _type: Any) -> str:
    # cattrs would turn 5 into "5"; a manifest that says `goal = 5` is a mistake worth naming.
    if not isinstance(value, str):
        raise ManifestValueError(f"expected a string, not {show(value)}")
    if "\0" in value:
        raise ManifestValueError("contains a NUL character, which no command, path or text may hold")
    if len(value) > MAX_STRING_CHARS:
        raise ManifestValueError(f"is longer than {MAX_STRING_CHARS} characters")
    return value


def _strict_bool(value: Any, _type: Any) -> bool:
    if not isinstance(value, bool):
        raise ManifestValueError(f"expected true or false, not {show(value)}")
    return value


def _strict_float(value: Any, _type: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ManifestValueError(f"expected a number, not {show(value)}")
    if isinstance(value, int) and abs(value) > 2**53:
        raise ManifestValueError(f"{show(value)} is out of range")
    if not math.isfinite(value):
        raise ManifestValueError(f"expected a finite number, not {show(value)}")
    return float(value)


def _strict_int(value: Any, _type: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ManifestValueError(f"expected an integer, not {show(value)}")
    return value


def _capability(value: Any, _type: Any) -> Capability:
    """One capability: `needs = "gpu"`, or a list of one as a plan task's `needs` also reads."""
    if isinstance(value, list):
        if len(value) != 1:
            raise ManifestValueError(
                f"names one capability (a string, or a list of one string), not {show(value)}"
            )
        value = value[0]
    text = _strict_str(value, str).strip()
    if not text:
        raise ManifestValueError("must name a capability, not an empty string")
    return Capability(text)


def _seconds(value: Any, _type: Any) -> Seconds:
    """A duration: a number of seconds, or text such as "90s", "5m", "1h30m"."""
    if isinstance(value, str):
        seconds = duration_seconds(value)
        if seconds is None:
            raise ManifestValueError(f"expected {DURATION_FORMS}, not {show(value)}")
    elif isinstance(value, int | float) and not isinstance(value, bool):
        if isinstance(value, int) and abs(value) > 2**53:
            raise ManifestValueError(f"{show(value)} seconds is out of range (at most a year)")
        seconds = float(value)
    else:
        raise ManifestValueError(f"expected {DURATION_FORMS}, not {show(value)}")
    problem = duration_problem(seconds)
    if problem:
        raise ManifestValueError(f"{problem} (got {show(value)})")
    return Seconds(seconds)


def _direction(value: Any, _type: Any) -> Direction:
    if not isinstance(value, str) or value not in Direction.__members__.values():
        raise ManifestValueError(f"expected one of lower, higher, not {show(value)}")
    return Direction(value)


def _statistic(value: Any, _type: Any) -> Statistic:
    if not isinstance(value, str) or value not in Statistic.__members__.values():
        raise ManifestValueError(f"expected one of median, mean, not {show(value)}")
    return Statistic(value)


def _margin(value: Any, _type: Any) -> Margin:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ManifestValueError(f'expected a number or a percentage like "2%", not {show(value)}')
    try:
        return parse_margin(value)
    except MarginError as exc:
        raise ManifestValueError(str(exc)) from None


def _array(value: Any, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise ManifestValueError(f"expected an array of {what}, not {show(value)}")
    return value


def _string_array(value: Any, _type: Any) -> tuple[str, ...]:
    items = []
    for index, item in enumerate(_array(value, "strings")):
        try:
            items.append(_strict_str(item, str))
        except ManifestValueError as exc:
            raise _At(f"[{index}]", exc) from None
    return tuple(items)


def _inject_entry(value: Any, _type: Any) -> str | InjectEntry:
    if isinstance(value, str):
        return _strict_str(value, str)
    if isinstance(value, dict):
        return converter.structure(value, InjectEntry)
    raise ManifestValueError(f"expected a string or a table {{src, dst, frozen}}, not {show(value)}")


def _inject_array(value: Any, _type: Any) -> tuple[str | InjectEntry, ...]:
    items = []
    for index, item in enumerate(_array(value, "strings or tables")):
        try:
            items.append(_inject_entry(item, None))
        except Exception as exc:  # every failure is re-raised with its index
            raise _At(f"[{index}]", exc) from None
    return tuple(items)


def _tables_of(cls: type, spelled: str) -> Any:
    """The hook for an array of tables (`[[preflight.rung]]`) of one record type."""

    def hook(value: Any, _type: Any) -> tuple[Any, ...]:
        items: list[Any] = []
        for index, item in enumerate(_array(value, f"tables (write {spelled})")):
            try:
                items.append(converter.structure(item, cls))
            except Exception as exc:  # every failure is re-raised with its index
                raise _At(f"[{index}]", exc) from None
        return tuple(items)

    return hook


# Environment variable names: what execve can carry. `=` would split the name, NUL ends it.
def _env_table(value: Any, _type: Any) -> dict[str, str]:
    if not isinstance(value, dict):
        raise ManifestValueError(f'expected a table of NAME = "value" strings, not {show(value)}')
    env: dict[str, str] = {}
    for key, item in value.items():
        if not key or "=" in key or "\0" in key or not key.isprintable() or " " in key:
            raise ManifestValueError(
                f"{show(key)} is not a usable environment variable name (no '=', spaces, control "
                "characters, and not empty)"
            )
        try:
            env[key] = _strict_str(item, str)
        except ManifestValueError as exc:
            raise _At(f".{key}", exc) from None
    return env


class NotATable(ManifestValueError):
    """A section given as something other than one table (`[[judge]]`, `judge = 5`)."""


def _table_hook_factory(cl: type, conv: cattrs.Converter) -> Any:
    # The structuring function is generated when a table of this class is first structured, not
    # when the class containing it is: a manifest writes a handful of the sections there are, and
    # generating (and compiling) one function per section up front was most of the first load.
    generated: list[Callable[[Any, Any], Any]] = []

    def hook(value: Any, type_: Any) -> Any:
        if isinstance(value, list):
            raise NotATable("must be one table, not an array of tables (write [name], not [[name]])")
        if not isinstance(value, dict):
            raise NotATable(f"must be a table, not {show(value)}")
        if not generated:
            # `conv`, not the module's converter: a copy (the plan loader's) must use its own hooks.
            generated.append(cattrs.gen.make_dict_structure_fn(cl, conv, _cattrs_forbid_extra_keys=True))
        return generated[0](value, type_)

    return hook


# Registered before the str hook: Direction is a str subclass and would otherwise match it.
converter.register_structure_hook(Direction, _direction)
converter.register_structure_hook(Seconds, _seconds)
converter.register_structure_hook(Capability, _capability)
converter.register_structure_hook(str, _strict_str)
converter.register_structure_hook(bool, _strict_bool)
converter.register_structure_hook(float, _strict_float)
converter.register_structure_hook(int, _strict_int)


def _equals(alias: object) -> Callable[[Any], bool]:
    return lambda t: bool(t == alias)


# Generic aliases are not classes; match them by equality.
for _alias, _hook in (
    (tuple[str, ...], _string_array),
    (tuple[str | InjectEntry, ...], _inject_array),
    (dict[str, str], _env_table),
    (tuple[PreflightRung, ...], _tables_of(PreflightRung, "[[preflight.rung]]")),
):
    converter.register_structure_hook_func(_equals(_alias), _hook)
converter.register_structure_hook(str | InjectEntry, _inject_entry)
converter.register_structure_hook_factory(attrs.has, _table_hook_factory)
# after the attrs factory, so it wins: Margin is an attrs record but a manifest writes it as a scalar
converter.register_structure_hook_func(lambda t: t is Margin, _margin)
converter.register_structure_hook(Statistic, _statistic)


def key_path(path: str) -> str:
    """`$.judge.selftest.runs` -> `[judge.selftest].runs`; `$.workspace.inject[2].src` -> `[workspace].inject[2].src`."""
    path = path.removeprefix("$").lstrip(".")
    if not path:
        return "(top level)"
    parts = re.findall(r"[^.\[\]]+|\[\d+\]", path)
    first_index = next((i for i, part in enumerate(parts) if part.startswith("[")), len(parts))
    # The key is the last name before any array index; every name before it is a table.
    key_at = max(first_index - 1, 0)
    tables, rest = parts[:key_at], parts[key_at:]
    tail = "".join(p if p.startswith("[") else f".{p}" for p in rest).lstrip(".")
    return f"[{'.'.join(tables)}].{tail}" if tables else tail


def table_path(path: str) -> str:
    """`$.judge.selftest` -> `[judge.selftest]`."""
    inner = path.removeprefix("$").lstrip(".")
    return f"[{inner}]" if inner else "the top level"


def _tables_by_key(cl: type, prefix: str = "") -> dict[str, list[str]]:
    """Every key of the manifest schema, with the tables it belongs in (`backend` -> [agent])."""
    found: dict[str, list[str]] = {}
    for field in attrs.fields(cl):
        found.setdefault(field.name, []).append(f"[{prefix}]" if prefix else "the top level")
        for arg in (field.type, *getattr(field.type, "__args__", ())):
            if isinstance(arg, type) and attrs.has(arg):
                dotted = f"{prefix}.{field.name}" if prefix else field.name
                for key, where in _tables_by_key(arg, dotted).items():
                    found.setdefault(key, []).extend(where)
    return found


def _suggest(key: str, known: list[str], here: str) -> str:
    import difflib  # for a hint only, so not imported at start-up

    close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    if close:
        return f" (did you mean {close[0]}?)"
    elsewhere = [table for table in _schema_keys().get(key, []) if table != here]
    return f" ({key} belongs in {' or '.join(elsewhere)})" if elsewhere else ""


@functools.cache
def _schema_keys() -> dict[str, list[str]]:
    return _tables_by_key(Manifest)


def describe_structure_error(exc: BaseException) -> list[str]:
    """Render a cattrs failure as one message per problem, each naming its key path."""
    messages: list[str] = []

    def walk(error: BaseException, path: str) -> None:
        if isinstance(error, _At):
            walk(error.error, path + error.step)
            return
        if isinstance(error, ForbiddenExtraKeysError):
            known = [f.name for f in attrs.fields(error.cl)] if attrs.has(error.cl) else []
            for key in sorted(error.extra_fields):
                here = table_path(path)
                messages.append(f"unknown key {key!r} in {here}{_suggest(key, known, here)}")
            return
        if isinstance(error, ClassValidationError | IterableValidationError):
            for sub in error.exceptions:
                sub_path = path
                for note in getattr(sub, "__notes__", None) or []:
                    name = getattr(note, "name", None)
                    index = getattr(note, "index", None)
                    if name is not None:
                        sub_path = f"{path}.{name}"
                    elif index is not None:
                        sub_path = f"{path}[{index}]"
                walk(sub, sub_path)
            return
        if isinstance(error, KeyError):
            messages.append(f"{key_path(path)} is required")
            return
        if isinstance(error, NotATable):
            messages.append(f"{table_path(path)} {error}")
            return
        if isinstance(error, ManifestValueError):
            messages.append(f"{key_path(path)}: {error}")
            return
        if type(error) is ValueError and str(error):
            # a settings class refusing a combination in __attrs_post_init__ (plugin-owned settings)
            messages.append(f"{table_path(path)}: {error}")
            return
        # Anything else is a gap in the hooks above; still name where, never Python's wording.
        messages.append(f"{key_path(path)}: this value cannot be used here")

    walk(exc, "$")
    return messages or ["the manifest could not be read (see `crucible help manifest`)"]
