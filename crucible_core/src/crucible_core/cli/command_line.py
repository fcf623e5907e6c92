"""How the `crucible` command line is read before click sees it: the old spelling, and whether it
only prints (help, the version, a print-only command), which decides what the process sets up."""

from __future__ import annotations

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
