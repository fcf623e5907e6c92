"""The environment a CLI turn runs with: the turn's own, the CLI's quiet defaults, and a home of its own."""

from __future__ import annotations

from collections.abc import Mapping


def turn_env(base: Mapping[str, str], home: str, quiet: Mapping[str, str], **own: str) -> dict[str, str]:
    """`base` (the turn's environment) with `quiet` filled in where it sets nothing, HOME, the XDG
    directories and TMPDIR under `home` (so nothing the CLI or its tools keep lands in the user's
    home or outlives the turn: the CLIs' runtimes unpack native libraries into TMPDIR), and the
    harness's `own` variables over everything. The turn's script makes TMPDIR (cli_lookup.PROGRAM_STEP)."""
    env = dict(base)
    for key, value in quiet.items():
        env.setdefault(key, value)
    env.update(
        {
            "HOME": home,
            "XDG_CONFIG_HOME": f"{home}/.config",
            "XDG_DATA_HOME": f"{home}/.local/share",
            "XDG_CACHE_HOME": f"{home}/.cache",
            "XDG_STATE_HOME": f"{home}/.local/state",
            "TMPDIR": f"{home}/tmp",
        }
    )
    env.update(own)
    return env
