"""The `crucible` console script ends without the interpreter's teardown once every exit handler
has run: with the command's own exit code, and its output flushed to the end."""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

import pytest

from crucible_core.cli.console_script import exit_status
from tests.cli_support import CRUCIBLE, crucible_env, run_crucible

# Imported at every start from PYTHONPATH: an object whose finalizer says when the interpreter
# tore the module down (which the quick exit skips), and, if asked, an exit handler registered
# before the console script's (which must then leave the exit to the interpreter).
SITECUSTOMIZE = textwrap.dedent(
    """
    import atexit, os, sys

    class Teardown:
        # os.write kept here: the teardown may have cleared this module's globals first.
        def __del__(self, write=os.write):
            write(2, b"torn down\\n")

    # Kept by the sys module, which the teardown clears (this module's own globals may outlive it).
    sys.teardown_marker = Teardown()
    if os.environ.get("EARLY_EXIT_HANDLER"):
        atexit.register(lambda: os.write(2, b"early handler ran\\n"))
    """
)


def _crucible(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    environment = crucible_env(PYTHONPATH=str(site), CRUCIBLE_CACHE_DIR=str(tmp_path / "cache"), **env)
    return subprocess.run(
        [str(CRUCIBLE), *args], capture_output=True, text=True, env=environment, cwd=tmp_path, timeout=120
    )


def test_the_exit_codes_are_the_commands_and_the_teardown_is_skipped(tmp_path: Path) -> None:
    version = _crucible(tmp_path, "--version")
    assert version.returncode == 0 and version.stdout.startswith("crucible ")
    assert "torn down" not in version.stderr  # ended before the interpreter cleared the modules

    usage = _crucible(tmp_path, "no-such-command")
    assert usage.returncode == 64, usage.stderr
    assert "no such command 'no-such-command'" in usage.stderr
    assert "torn down" not in usage.stderr

    (tmp_path / "bad.toml").write_text("[no_such_section]\nkey = 1\n")
    manifest = _crucible(tmp_path, "run", "--manifest", "bad.toml")
    assert manifest.returncode == 10, manifest.stderr
    assert manifest.stderr.startswith("crucible: error:")
    assert "torn down" not in manifest.stderr


def test_exit_handlers_registered_before_the_console_script_keep_the_interpreters_exit(
    tmp_path: Path,
) -> None:
    """A handler registered first would run after the quick exit, that is never: the process
    then ends as Python ends it, every handler run and the modules torn down."""
    done = _crucible(tmp_path, "no-such-command", EARLY_EXIT_HANDLER="1")
    assert done.returncode == 64
    assert "early handler ran" in done.stderr and "torn down" in done.stderr


def test_a_large_output_is_flushed_to_the_end_through_a_pipe(tmp_path: Path) -> None:
    """`crucible help plugins` prints more than a pipe holds: all of it arrives before the exit."""
    done = _crucible(tmp_path, "help", "plugins")
    assert done.returncode == 0, done.stderr
    expected = run_crucible("help", "plugins").stdout
    assert len(expected) > 65536
    assert done.stdout == expected


@pytest.mark.parametrize(
    ("code", "status"), [(None, 0), (0, 0), (10, 10), (64, 64), (256 + 3, 3), (True, 1), ("message", 1)]
)
def test_the_exit_status_is_the_interpreters_for_each_exit_code(code: object, status: int) -> None:
    assert exit_status(code) == status


def test_files_left_open_are_flushed_before_the_quick_exit(tmp_path: Path) -> None:
    """What a plugin wrote to a file it left open reaches the file, as the teardown's finalizers
    made it; a closed one is passed over."""
    from crucible_core.cli.console_script import _flush_open_files

    text = (tmp_path / "text.log").open("w")  # left open on purpose
    raw = (tmp_path / "raw.bin").open("wb")
    closed = (tmp_path / "closed.log").open("w")
    closed.close()
    text.write("kept\n")
    raw.write(b"kept too")
    assert (tmp_path / "text.log").read_text() == ""  # still in the buffer
    _flush_open_files()
    assert (tmp_path / "text.log").read_text() == "kept\n"
    assert (tmp_path / "raw.bin").read_bytes() == b"kept too"
    text.close()
    raw.close()
