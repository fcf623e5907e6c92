"""The commands plugins add, named for `crucible --help` and shell completion without loading every plugin.

Listing a plugin's commands means importing it, which costs far more than the rest of `--help`.
The names and one-line helps are kept in a small cache file, beside what decides them: the
import path with each entry's modification time (an install or uninstall changes a
site-packages directory) and CRUCIBLE_LOAD_PLUGINS. A missing, stale or unreadable cache is
rebuilt by loading the plugins once; a cache that cannot be written is simply not kept.
"""

from __future__ import annotations

import os

from crucible_core.plugin_index import cache_file, fingerprint, read_cache, write_cache

CACHE_STEM = "plugin-commands"
HELP_WIDTH = 80

# Plain strings and os.path only: `crucible --help` reads this module, and pathlib and hashlib
# would cost more than the rest of it (docs/performance.md).


def _fingerprint() -> str:
    """What decides the command list: each import path entry with its modification time (an
    install or uninstall changes a site-packages directory), and CRUCIBLE_LOAD_PLUGINS."""
    return fingerprint(entry_point_files=False) + "\n" + os.environ.get("CRUCIBLE_LOAD_PLUGINS", "\0unset")


def plugin_commands(builtin: frozenset[str]) -> dict[str, str]:
    """Each plugin command's name -> its one-line help (a name that shadows a built-in is left out)."""
    path = cache_file(CACHE_STEM)
    key = _fingerprint()
    cached = read_cache(path, key)
    commands = cached.get("commands") if cached is not None else None
    if isinstance(commands, dict) and all(isinstance(v, str) for v in commands.values()):
        return {str(k): v for k, v in commands.items()}
    found = _load(builtin)
    write_cache(path, {"key": key, "commands": found})
    return found


def _load(builtin: frozenset[str]) -> dict[str, str]:
    from crucible_core.plugins import load_plugins

    registry = load_plugins().registry("command", strict=False)
    return {
        name: entry.value.get_short_help_str(limit=HELP_WIDTH)
        for name, entry in sorted(registry.entries.items())
        if name not in builtin and " " not in name  # "plan run" is a subcommand of `crucible plan`
    }
