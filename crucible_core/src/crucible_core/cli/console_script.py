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

from crucible_core.cli.command_line import normalize, only_help


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
