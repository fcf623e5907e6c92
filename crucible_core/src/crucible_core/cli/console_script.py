"""The `crucible` console script: the collector off before anything of crucible is imported, the
modules' code from the imported-code cache, and an exit without the interpreter's teardown.

Importing `cli.main` imports click (and inspect, typing, enum under it): some ten thousand
objects that live until the process ends, walked by about fifteen collections on the way
(issue 27, docs/performance.md). The installed `crucible` command starts here, turns collection
off (start_up.py), serves the modules it imports from the imported-code cache
(imported_code.py), for a command that starts children installs the generated-code cache, then
runs `cli.main.main`, which decides what the process is and when its start-up is over. Calling
`cli.main.main` directly (`python -m crucible_core.cli.main`, a test, an embedding program) is
unchanged.

Once the command has ended and every exit handler has run, the process ends at once
(`os._exit`) with the command's exit code, its standard output and error flushed: the
interpreter's own teardown (clearing every module, freeing every object) took some 10 ms and
changes nothing a finished command leaves behind. A file a plugin left open loses what it had
not flushed (docs/plugins.md says to close files, or flush them, before the command returns).
The exit handler is registered first, so it runs last: after threading has joined the threads
still running and after every handler registered later (the caches' writes, logging's
shutdown). When exit handlers were registered before the console script started (a
`sitecustomize`, a coverage tool), or the command ended on an interrupt (Python then ends the
process by the signal), the interpreter ends as it always does.
"""

from __future__ import annotations

import atexit
import os
import sys

from crucible_core.cli.command_line import normalize, only_help

# The exit code the command ended with, once it ended in a way the quick exit keeps; None: end
# through the interpreter's own teardown.
_exit_code: int | None = None


def main() -> None:
    from crucible_core import start_up

    global _exit_code
    start_up.begin()
    quick_exit = _arm_quick_exit()
    from crucible_core import imported_code

    # Every module imported from here on comes from the imported-code cache when it holds it.
    imported_code.install()
    if not only_help(normalize(sys.argv[1:])):
        # The code attrs, cattrs and typing generate comes from the cache (generated_code.py)
        # from here on: the NamedTuples imported with the CLI turn some 40 string annotations
        # into ForwardRefs, each compiled otherwise. A command that only prints never reads it.
        from crucible_core import generated_code

        generated_code.install()
    from crucible_core.cli.main import main as crucible

    try:
        crucible()
    except SystemExit as stop:
        _exit_code = exit_status(stop.code) if quick_exit else None
        raise
    except KeyboardInterrupt:
        raise  # Python ends the process by SIGINT, after its own teardown
    except BaseException:
        _exit_code = 1 if quick_exit else None  # Python prints the traceback, then ends with 1
        raise
    _exit_code = 0 if quick_exit else None


def exit_status(code: object) -> int:
    """The status the interpreter ends with for `sys.exit(code)`: 0 for None, the number for an
    integer (as the system keeps it, its low eight bits), 1 for anything else (Python prints it)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    return 1


def _flush_open_files() -> None:
    """Flush the buffered files still open that the collector tracks, as their finalizers would
    in the teardown: the command's own (start-up's are frozen out of its sight, start_up.py), in
    some 0.05 ms. A file that cannot be flushed is left as it is."""
    import gc
    import io

    # The types themselves, not isinstance: that asks each object for its __class__, which a
    # proxy may answer by running code.
    kinds = {io.BufferedWriter, io.BufferedRandom, io.TextIOWrapper}
    for thing in gc.get_objects():
        if type(thing) in kinds:
            try:
                if not thing.closed:
                    thing.flush()
            except Exception:  # a broken pipe, a full disk: the teardown ignored them too
                pass


def _arm_quick_exit() -> bool:
    """Register the quick exit as the first exit handler (it runs last), unless one is there already."""
    # CPython's count of registered handlers; an interpreter without it keeps its own exit.
    registered = getattr(atexit, "_ncallbacks", None)
    if registered is None or registered():
        return False  # registered before us: they would run after the quick exit, that is never
    pid = os.getpid()

    def end_now() -> None:
        code = _exit_code
        if code is None or os.getpid() != pid:  # an interrupt, an error before the command, a fork
            return
        _flush_open_files()
        try:
            for stream in {
                id(s): s for s in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__)
            }.values():
                if stream is not None:
                    stream.flush()
        except (OSError, ValueError):
            return  # a closed pipe: the interpreter reports it and ends with its own status (120)
        os._exit(code)

    atexit.register(end_now)
    return True
