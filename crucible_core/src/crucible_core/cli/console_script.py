"""The `crucible` console script: the collector off before anything of crucible is imported.

Importing `cli.main` imports click (and inspect, typing, enum under it): some ten thousand
objects that live until the process ends, walked by about fifteen collections on the way
(issue 27, docs/performance.md). The installed `crucible` command starts here, turns collection
off (start_up.py), for a command that starts children installs the generated-code cache, then
runs `cli.main.main`, which decides what the process is and when its
start-up is over. Calling `cli.main.main` directly (`python -m crucible_core.cli.main`, a test,
an embedding program) is unchanged.
"""

from __future__ import annotations

import sys

# Commands that only print and start no child: they skip the supervisor's import (see cli.main).
PRINT_ONLY = frozenset({"plugins", "help", "completion"})


def normalize(argv: list[str]) -> list[str]:
    # Users of the original tool type `crucible --manifest x.toml --iterations 6`.
    if argv and argv[0].startswith("--") and argv[0] not in ("--help", "--version"):
        return ["run", *argv]
    return argv


def only_help(args: list[str]) -> bool:
    """A command line that prints help, the version or a print-only command's listing."""
    return not args or args[-1] in ("--help", "-h") or args == ["--version"] or args[0] in PRINT_ONLY


def main() -> None:
    from crucible_core import start_up

    start_up.begin()
    if not only_help(normalize(sys.argv[1:])):
        # The code attrs, cattrs and typing generate comes from the cache (generated_code.py)
        # from here on: the NamedTuples imported with the CLI turn some 40 string annotations
        # into ForwardRefs, each compiled otherwise. A command that only prints never reads it.
        from crucible_core import generated_code

        generated_code.install()
    from crucible_core.cli.main import main as crucible

    crucible()
