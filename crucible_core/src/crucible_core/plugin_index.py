"""The `crucible` entry points with their distributions and versions, remembered between processes.

Finding entry points means importing `importlib.metadata` and reading every installed
distribution's metadata (stevedore does it, and the distribution and version of each take a second
scan), which was a third of what `crucible plugins` cost. What stevedore found is written to a
small file beside a fingerprint of what decides it: each import path entry, the distribution
metadata directories in it (`*.dist-info`, `*.egg-info`: their names carry the version) and the
modification time of each one's entry_points.txt. Installing, upgrading or removing a
distribution changes one of them, so a stale index is never used; a missing, stale or unreadable
index is rebuilt, and one that cannot be written is simply not kept. A directory's own
modification time is left out where it can be listed: Python creating `__pycache__` there
changes it, and that changes no entry point.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import sys
import zlib
from typing import Any, NamedTuple

CACHE_ENV = "CRUCIBLE_CACHE_DIR"
INDEX_STEM = "plugin-index"

# Plain strings, os and json only: this runs before any plugin loads, on every command.


class IndexedEntryPoint(NamedTuple):
    name: str  # the entry-point name (`world_git`)
    value: str  # what it names: `module` or `module:attribute`
    distribution: str
    version: str


def cache_dir(environ: dict[str, str] | None = None) -> str | None:
    """Where crucible keeps caches: $CRUCIBLE_CACHE_DIR, else $XDG_CACHE_HOME/crucible or ~/.cache/crucible."""
    env = os.environ if environ is None else environ
    if env.get(CACHE_ENV):
        return env[CACHE_ENV]
    base = env.get("XDG_CACHE_HOME") or (os.path.join(env["HOME"], ".cache") if env.get("HOME") else "")
    return os.path.join(base, "crucible") if base else None


def _mtime(path: str) -> int:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return 0


_METADATA_SUFFIXES = (".dist-info", ".egg-info")


def fingerprint(*, entry_point_files: bool = True) -> str:
    """What decides the entry points found on the import path; kept whole in the cache file and
    compared, so nothing is hashed.

    With entry_point_files (the plugin index): each import path entry with each distribution's
    metadata directory in it and the modification time of its entry_points.txt; an entry that
    cannot be listed (a zip file, or gone) with its own modification time. Without (the command
    cache, which must not list directories on `--help`): each entry with its modification time,
    which also moves, once, when Python first makes a `__pycache__` there.
    """
    parts = []
    for entry in sys.path:
        if not entry:
            continue  # `python -c`'s working directory: where plugins are never installed, and busy
        if not entry_point_files:
            parts.append(f"{entry}\0{_mtime(entry)}")
            continue
        try:
            names = sorted(os.listdir(entry))
        except OSError:
            parts.append(f"{entry}\0{_mtime(entry)}")
            continue
        parts.append(entry)
        for name in names:
            if name.endswith(_METADATA_SUFFIXES):
                listed = os.path.join(entry, name, "entry_points.txt")
                parts.append(f"{listed}\0{_mtime(listed)}")
    return "\n".join(parts)


def cache_file(stem: str, suffix: str = ".json") -> str | None:
    """The cache file `stem` of this interpreter, or None when there is no cache directory. One
    file per interpreter, so installations sharing a cache directory do not evict each other."""
    directory = cache_dir()
    if directory is None:
        return None
    tag = zlib.crc32(f"{sys.executable}\0{sys.prefix}".encode("utf-8", "surrogateescape"))
    return os.path.join(directory, f"{stem}-{tag:08x}{suffix}")


def read_cache(path: str | None, key: str) -> dict[str, Any] | None:
    """The cache file's content when it was written under `key`; None when missing, stale or unreadable."""
    if path is None:
        return None
    try:
        # Never through a link, and a FIFO planted there neither blocks the open nor is read.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
        with open(fd, encoding="utf-8", errors="surrogateescape") as handle:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return None
            kept = json.load(handle)
    except (OSError, ValueError):
        return None
    return kept if isinstance(kept, dict) and kept.get("key") == key else None


def write_cache(path: str | None, content: dict[str, Any]) -> None:
    """Replace the cache file at once (readers never see half of it); one that cannot be written is not kept."""
    write_bytes(path, json.dumps(content).encode("utf-8", "surrogateescape"))


def write_bytes(path: str | None, data: bytes) -> None:
    """Replace a cache file at once with `data`, readable by its owner only.

    The temporary name is predictable, and an agent running as the same user could plant a
    link there: whatever stands at it is removed, and the file is created, never opened through
    a link (the marshal cache holds code crucible runs, see generated_code.py).
    """
    if path is None:
        return
    temp = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        os.replace(temp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(temp)


class Index(NamedTuple):
    entry_points: list[IndexedEntryPoint]
    # The import path entry each plugin's top-level module was found in, by module name: the
    # next process looks for it there first (see plugins.py, _IndexedLocations).
    locations: dict[str, str]


def read(group: str, key: str) -> Index | None:
    """The entry points of `group` as last recorded under `key`, or None when there is no fresh record."""
    kept = read_cache(cache_file(INDEX_STEM), key)
    if kept is None or kept.get("group") != group:
        return None
    rows = kept.get("entry_points")
    if not isinstance(rows, list) or not all(
        isinstance(row, list) and len(row) == 4 and all(isinstance(field, str) for field in row)
        for row in rows
    ):
        return None
    locations = kept.get("locations")  # an index written before they were kept is rebuilt once
    if not isinstance(locations, dict) or not all(
        isinstance(name, str) and isinstance(entry, str) for name, entry in locations.items()
    ):
        return None
    return Index([IndexedEntryPoint(*row) for row in rows], locations)


def keep(group: str, key: str, entry_points: list[IndexedEntryPoint], locations: dict[str, str]) -> None:
    """Record the entry points of `group` found under `key`, and where their modules were found."""
    rows = [list(entry_point) for entry_point in entry_points]
    write_cache(
        cache_file(INDEX_STEM), {"key": key, "group": group, "entry_points": rows, "locations": locations}
    )


def location_of(module: object) -> str | None:
    """The import path entry (an item of sys.path) a top-level module was imported from, or None
    when it came from elsewhere (a zip, a namespace package, a path not on sys.path)."""
    spec = getattr(module, "__spec__", None)
    origin = getattr(spec, "origin", None)
    if spec is None or not isinstance(origin, str) or not spec.has_location or "." in spec.name:
        return None
    folder = os.path.dirname(origin)
    entry = os.path.dirname(folder) if spec.submodule_search_locations is not None else folder
    return entry if entry in sys.path else None
