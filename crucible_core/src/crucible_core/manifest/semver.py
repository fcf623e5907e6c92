"""Semantic-version requirements (`>=1.2, <2`, `^1.4`, `~1.4.2`, `=1.0.0`, `1.2`, `*`), as Cargo reads them.

Pre-release and build tags are compared only for equality of the numeric core: a catalog
version's `-rc1` never satisfies a plain requirement, as in Cargo.
"""

from __future__ import annotations

import re

_VERSION = re.compile(r"(\d+)(?:\.(\d+))?(?:\.(\d+))?(?:-([0-9A-Za-z.-]+))?(?:\+[0-9A-Za-z.-]+)?")
_COMPARATOR = re.compile(r"\s*(>=|<=|>|<|=|\^|~)?\s*(\S+)\s*")


class SemverError(ValueError):
    pass


Version = tuple[int, int, int]


def parse_version(text: str) -> tuple[Version, str]:
    """A full version `MAJOR.MINOR.PATCH[-pre][+build]`: (the numeric core, the pre-release tag)."""
    match = _VERSION.fullmatch(text.strip())
    if match is None or match.group(3) is None:
        raise SemverError(f"{text!r} is not a version MAJOR.MINOR.PATCH")
    return (int(match.group(1)), int(match.group(2)), int(match.group(3))), match.group(4) or ""


def _partial(text: str) -> tuple[int, int | None, int | None]:
    text = text.removesuffix(".*").removesuffix(".x")
    match = _VERSION.fullmatch(text)
    if match is None or match.group(4):
        raise SemverError(f"{text!r} is not a version in a requirement")
    minor = int(match.group(2)) if match.group(2) is not None else None
    patch = int(match.group(3)) if match.group(3) is not None else None
    return int(match.group(1)), minor, patch


def _bounds(op: str, text: str) -> list[tuple[str, Version]]:
    major, minor, patch = _partial(text)
    low = (major, minor or 0, patch or 0)
    if op in ("", "^"):
        if major > 0 or minor is None:
            high = (major + 1, 0, 0)
        elif minor > 0 or patch is None:
            high = (0, minor + 1, 0)
        else:
            high = (0, 0, (patch or 0) + 1)
        return [(">=", low), ("<", high)]
    if op == "~":
        high = (major, minor + 1, 0) if minor is not None else (major + 1, 0, 0)
        return [(">=", low), ("<", high)]
    if op == "=":
        if patch is not None:
            return [("=", low)]
        high = (major, minor + 1, 0) if minor is not None else (major + 1, 0, 0)
        return [(">=", low), ("<", high)]
    if op in (">", "<="):
        # A partial version in > or <= means the whole named range: >1.2 is >=1.3.0.
        if patch is None:
            edge = (major, minor + 1, 0) if minor is not None else (major + 1, 0, 0)
            return [(">=" if op == ">" else "<", edge)]
        return [(op, low)]
    return [(op, low)]


def parse_requirement(text: str) -> list[tuple[str, Version]]:
    """The comparators a requirement means; `*` (or empty) admits every release."""
    text = text.strip()
    if text in ("", "*"):
        return []
    found: list[tuple[str, Version]] = []
    for part in text.split(","):
        match = _COMPARATOR.fullmatch(part)
        if match is None:
            raise SemverError(f"{text!r} is not a version requirement")
        found += _bounds(match.group(1) or "", match.group(2))
    return found


def admits(requirement: str, version: str) -> bool:
    core, pre = parse_version(version)
    if pre:
        return False
    checks = {
        ">=": lambda v: core >= v,
        ">": lambda v: core > v,
        "<=": lambda v: core <= v,
        "<": lambda v: core < v,
        "=": lambda v: core == v,
    }
    return all(checks[op](bound) for op, bound in parse_requirement(requirement))
