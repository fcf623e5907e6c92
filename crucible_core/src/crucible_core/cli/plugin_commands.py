"""The commands plugins add, named for `crucible --help` and shell completion without loading every plugin.

Listing a plugin's commands means importing it, which costs far more than the rest of `--help`.
The names and one-line helps are kept in a small cache file, beside what decides them: the
import path with each entry's modification time (an install or uninstall changes a
site-packages directory) and CRUCIBLE_LOAD_PLUGINS. A missing, stale or unreadable cache is
rebuilt by loading the plugins once; a cache that cannot be written is simply not kept.
"""

from __future__ import annotations

import json
import os
import sys

CACHE_ENV = "CRUCIBLE_CACHE_DIR"
CACHE_FILE = "plugin-commands.json"
HELP_WIDTH = 80

# Plain strings and os.path only: `crucible --help` reads this module, and pathlib and hashlib
# would cost more than the rest of it (docs/performance.md).


def cache_dir(environ: dict[str, str] | None = None) -> str | None:
    env = os.environ if environ is None else environ
    if env.get(CACHE_ENV):
        return env[CACHE_ENV]
    base = env.get("XDG_CACHE_HOME") or (os.path.join(env["HOME"], ".cache") if env.get("HOME") else "")
    return os.path.join(base, "crucible") if base else None


def _fingerprint() -> str:
    """What decides the command list: each import path entry with its modification time, and
    CRUCIBLE_LOAD_PLUGINS. Kept whole in the cache file and compared, so nothing is hashed."""
    parts = []
    for entry in sys.path:
        if not entry:
            continue  # `python -c`'s working directory: where plugins are never installed, and busy
        try:
            mtime = os.stat(entry).st_mtime_ns
        except OSError:
            mtime = 0
        parts.append(f"{entry}\0{mtime}")
    parts.append(os.environ.get("CRUCIBLE_LOAD_PLUGINS", "\0unset"))
    return "\n".join(parts)


def plugin_commands(builtin: frozenset[str]) -> dict[str, str]:
    """Each plugin command's name -> its one-line help (a name that shadows a built-in is left out)."""
    directory = cache_dir()
    key = _fingerprint()
    path = os.path.join(directory, CACHE_FILE) if directory is not None else None
    if path is not None:
        try:
            with open(path, encoding="utf-8", errors="surrogateescape") as handle:
                cached = json.load(handle)
            commands = cached.get("commands") if isinstance(cached, dict) else None
            fresh = isinstance(cached, dict) and cached.get("key") == key
            if fresh and isinstance(commands, dict) and all(isinstance(v, str) for v in commands.values()):
                return {str(k): v for k, v in commands.items()}
        except (OSError, ValueError):
            pass
    found = _load(builtin)
    if path is not None:
        _keep(path, key, found)
    return found


def _load(builtin: frozenset[str]) -> dict[str, str]:
    from crucible_core.plugins import load_plugins

    registry = load_plugins().registry("command", strict=False)
    return {
        name: entry.value.get_short_help_str(limit=HELP_WIDTH)
        for name, entry in sorted(registry.entries.items())
        if name not in builtin
    }


def _keep(path: str, key: str, found: dict[str, str]) -> None:
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        temp = f"{path}.{os.getpid()}.tmp"
        with open(temp, "w", encoding="utf-8", errors="surrogateescape") as handle:
            json.dump({"key": key, "commands": found}, handle)
        os.replace(temp, path)
    except OSError:
        pass
