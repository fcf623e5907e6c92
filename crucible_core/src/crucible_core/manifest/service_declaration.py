"""`[[service]]` declarations: what a manifest or plan asks for, checked strictly before anything compiles."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs

from crucible_core.contract.records import value_methods
from crucible_core.errors import ManifestError

# compiled by `re` at the first check: most manifests declare no service
NAME_PATTERN = r"[a-z][a-z0-9_]*"
CAPABILITY_PREFIX = "service."
MAX_ARGS = 64
MAX_ARG_CHARS = 4096
_KEYS = frozenset({"name", "tool", "args", "version", "secrets"})
_SECRET_KEYS = frozenset({"name", "system", "scope"})


class ServiceDeclarationError(ManifestError):
    """A `[[service]]` table broke a rule; each problem names the service and the field."""

    def __init__(self, problems: list[str], source: str = "") -> None:
        self.problems = problems
        where = f" in {source}" if source else ""
        super().__init__(
            f"service declaration refused{where}: " + "; ".join(problems),
            hint="fix the [[service]] table(s) named above (docs/services.md, 'Declaring a service')",
        )


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class ServiceSecret:
    name: str
    system: str  # the external system the secret authorizes
    scope: str  # what it may do there


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class ServiceDeclaration:
    name: str
    tool: str
    args: tuple[str, ...] = ()
    version: str = "*"
    secrets: tuple[ServiceSecret, ...] = ()

    @property
    def capability(self) -> str:
        return CAPABILITY_PREFIX + self.name


def parse_declarations(
    raw: Any, *, forbidden_roots: Iterable[Path] = (), source: str = ""
) -> tuple[ServiceDeclaration, ...]:
    """Structure `[[service]]` tables; refuse (all problems at once) anything C-SERVICE-DECLARATION forbids.

    forbidden_roots: the pack and the workspace; an argument naming a path inside either is refused.
    """
    if raw is None:
        return ()
    if not isinstance(raw, list) or not all(isinstance(item, Mapping) for item in raw):
        raise ServiceDeclarationError(["[[service]] must be an array of tables"], source)
    roots = [Path(os.path.realpath(root)) for root in forbidden_roots]
    problems: list[str] = []
    found: list[ServiceDeclaration] = []
    seen: set[str] = set()
    for index, table in enumerate(raw):
        name = table.get("name")
        where = f"service {name!r}" if isinstance(name, str) else f"[[service]] #{index + 1}"
        unknown = sorted(set(table) - _KEYS)
        if unknown:
            problems.append(f"{where}: unknown field(s) {', '.join(unknown)}")
        if not isinstance(name, str) or not re.fullmatch(NAME_PATTERN, name):
            problems.append(f"{where}: field name must match [a-z][a-z0-9_]*")
            continue
        if name in seen:
            problems.append(f"{where}: field name repeats another service's name")
        seen.add(name)
        tool = table.get("tool")
        if not isinstance(tool, str) or not tool.strip():
            problems.append(f"{where}: field tool is required (the catalog tool's name)")
            tool = ""
        args = _args(table.get("args", []), where, roots, problems)
        version = table.get("version", "*")
        if not isinstance(version, str):
            problems.append(f"{where}: field version must be a semantic-version requirement string")
            version = "*"
        else:
            # the requirement grammar loads with the first declared service (most runs have none)
            from crucible_core.manifest.semver import SemverError, parse_requirement

            try:
                parse_requirement(version)
            except SemverError as exc:
                problems.append(f"{where}: field version: {exc}")
        secrets = _secrets(table.get("secrets", []), where, problems)
        found.append(ServiceDeclaration(name, tool, args, version, secrets))
    if problems:
        raise ServiceDeclarationError(problems, source)
    return tuple(found)


def _args(raw: Any, where: str, roots: list[Path], problems: list[str]) -> tuple[str, ...]:
    if not isinstance(raw, list) or not all(isinstance(arg, str) for arg in raw):
        problems.append(f"{where}: field args must be a list of strings")
        return ()
    if len(raw) > MAX_ARGS or any(len(arg) > MAX_ARG_CHARS or "\0" in arg for arg in raw):
        problems.append(f"{where}: field args is too long or holds a NUL byte")
        return ()
    for arg in raw:
        inside = _names_path_inside(arg, roots)
        if inside is not None:
            problems.append(f"{where}: field args: {arg!r} names a path inside {inside}")
        elif _climbs_out(arg):
            problems.append(
                f"{where}: field args: {arg!r} climbs out of the directory the tool runs in "
                "(<state dir>/services/<name>), into the run's state and toward the pack and the "
                "workspace; name an absolute path outside them"
            )
    return tuple(raw)


def _climbs_out(arg: str) -> bool:
    """A relative path (also in `--flag=path`) whose `..` leaves the directory it is read from.

    A service's tool runs in `<state dir>/services/<name>`, so such a path reaches the engine's
    state, the pack and the workspace around it, wherever the state directory is.
    """
    for candidate in (arg, arg.split("=", 1)[1] if "=" in arg else ""):
        if not candidate or "://" in candidate or os.path.isabs(os.path.expanduser(candidate)):
            continue
        if os.path.normpath(candidate).split("/")[0] == "..":
            return True
    return False


def _names_path_inside(arg: str, roots: list[Path]) -> Path | None:
    """The pack or workspace root an argument points into (also `--flag=path` forms), or None.

    Absolute and home-relative paths are resolved as they are; a relative path is read against
    each root (a tool might change to one); `_climbs_out` reads it from where the tool runs. A
    URL is not a path.
    """
    candidates = [arg]
    if "=" in arg:
        candidates.append(arg.split("=", 1)[1])
    for candidate in candidates:
        if not candidate or "://" in candidate:
            continue
        expanded = os.path.expanduser(candidate)
        if not (os.path.isabs(expanded) or candidate.startswith("./") or "/" in candidate.rstrip("/")):
            continue
        for root in roots:
            target = Path(os.path.realpath(expanded if os.path.isabs(expanded) else root / expanded))
            if target == root or root in target.parents:
                return root
    return None


def _secrets(raw: Any, where: str, problems: list[str]) -> tuple[ServiceSecret, ...]:
    if not isinstance(raw, list) or not all(isinstance(item, Mapping) for item in raw):
        problems.append(f"{where}: field secrets must be an array of tables (name, system, scope)")
        return ()
    found = []
    for item in raw:
        unknown = sorted(set(item) - _SECRET_KEYS)
        if unknown:
            problems.append(f"{where}: field secrets: unknown key(s) {', '.join(unknown)}")
        values = {key: item.get(key) for key in ("name", "system", "scope")}
        missing = [key for key, value in values.items() if not isinstance(value, str) or not value.strip()]
        if missing:
            problems.append(f"{where}: field secrets: each secret needs {', '.join(missing)}")
            continue
        found.append(ServiceSecret(values["name"], values["system"], values["scope"]))
    return tuple(found)
