"""The `crucible` console script: the collector off before anything of crucible is imported.

Importing `cli.main` imports click (and inspect, typing, enum under it): some ten thousand
objects that live until the process ends, walked by about fifteen collections on the way
(issue 27, docs/performance.md). The installed `crucible` command starts here, turns collection
off (start_up.py), then runs `cli.main.main`, which decides what the process is and when its
start-up is over. Calling `cli.main.main` directly (`python -m crucible_core.cli.main`, a test,
an embedding program) is unchanged.
"""

from __future__ import annotations


def main() -> None:
    from crucible_core import start_up

    start_up.begin()
    from crucible_core.cli.main import main as crucible

    crucible()
