"""The commands plugins add, named for `crucible --help` and shell completion without loading every plugin.

Listing a plugin's commands means importing it, which costs far more than the rest of `--help`.
The names and one-line helps are kept in a small cache file, keyed by what decides them: the
import path with each entry's modification time (an install or uninstall changes a
site-packages directory) and CRUCIBLE_LOAD_PLUGINS. A missing, stale or unreadable cache is
rebuilt by loading the plugins once; a cache that cannot be written is simply not kept.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

CACHE_ENV = "CRUCIBLE_CACHE_DIR"
HELP_WIDTH = 80


def cache_dir(environ: dict[str, str] | None = None) -> Path | None:
    env = os.environ if environ is None else environ
    if env.get(CACHE_ENV):
        return Path(env[CACHE_ENV])
    base = env.get("XDG_CACHE_HOME") or (str(Path(env["HOME"]) / ".cache") if env.get("HOME") else "")
    return Path(base) / "crucible" if base else None


def _fingerprint() -> str:
    digest = hashlib.sha256()
    for entry in sys.path:
        if not entry:
            continue  # `python -c`'s working directory: where plugins are never installed, and busy
        try:
            mtime = os.stat(entry).st_mtime_ns
        except OSError:
            mtime = 0
        digest.update(f"{entry}\0{mtime}\n".encode("utf-8", "surrogateescape"))
    digest.update(os.environ.get("CRUCIBLE_LOAD_PLUGINS", "\0unset").encode("utf-8", "surrogateescape"))
    return digest.hexdigest()[:32]


def plugin_commands(builtin: frozenset[str]) -> dict[str, str]:
    """Each plugin command's name -> its one-line help (a name that shadows a built-in is left out)."""
    directory = cache_dir()
    key = _fingerprint()
    path = directory / f"plugin-commands-{key}.json" if directory is not None else None
    if path is not None:
        try:
            cached = json.loads(path.read_text(encoding="utf-8"))
            if isinstance(cached, dict) and all(isinstance(v, str) for v in cached.values()):
                return {str(k): v for k, v in cached.items()}
        except (OSError, ValueError):
            pass
    found = _load(builtin)
    if path is not None:
        _keep(path, found)
    return found


def _load(builtin: frozenset[str]) -> dict[str, str]:
    from crucible_core.plugins import load_plugins

    registry = load_plugins().registry("command", strict=False)
    return {
        name: entry.value.get_short_help_str(limit=HELP_WIDTH)
        for name, entry in sorted(registry.entries.items())
        if name not in builtin
    }


def _keep(path: Path, found: dict[str, str]) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        for old in path.parent.glob("plugin-commands-*.json"):
            old.unlink(missing_ok=True)  # one install's cache at a time
        temp = path.with_suffix(f".{os.getpid()}.tmp")
        temp.write_text(json.dumps(found), encoding="utf-8")
        os.replace(temp, path)
    except OSError:
        pass
