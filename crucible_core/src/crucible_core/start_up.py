"""What the `crucible` process alone does while it starts: no garbage collection, then freeze.

Start-up imports the command's modules and the plugins' and, for a run, prepares the session
(the manifest read, the drivers built, the world's modules imported): some 40,000 objects that
live until the process ends, and almost nothing that dies young. The collector walking them
cost some 20 collections on the way and several full collections at exit (issue 27,
docs/performance.md). So the `crucible` process turns collection off at its start (`begin`:
the console script, before `cli.main` and click are imported, and `cli.main.main`)
and, once start-up is over (`settle`), moves what it built out of the collector's sight
(`gc.freeze`) and turns collection back on: the run's own objects are collected as before. A
test or a program calling `crucible_core.cli.main.main(arguments)` never calls `begin`, and
then nothing here changes its collector.
"""

from __future__ import annotations

import gc

# True once cli.main.main() knows this process is the `crucible` command itself, which ends with
# the command (not a test or a program calling main() with arguments).
_whole_process = False


def begin() -> None:
    """In the `crucible` process: collection off while start-up only builds what lives to the end.

    A command that only prints (`--help`, `--version`) never settles: it ends without collecting."""
    global _whole_process
    _whole_process = True
    gc.disable()


def goes_on() -> None:
    """Collection off again (`settle` turned it on) while a command goes on building what it runs
    on: a run's session modules, the plugins' and the prepared session. The command settles again
    once they are in."""
    if _whole_process:
        gc.disable()


def settle() -> None:
    """Move what start-up built so far out of the collector's sight, and collect again.

    Every full collection walks all tracked objects, and the interpreter runs several while it
    shuts down. Objects made after this point are collected as before, so a file the run left
    open is still closed at exit; only cycles among what start-up built, which live to the end
    anyway (or, the few that do not, never hold anything but memory), are never looked for.
    Called in-process, with no `begin`, it does nothing.
    """
    if _whole_process:
        gc.freeze()
        gc.enable()
