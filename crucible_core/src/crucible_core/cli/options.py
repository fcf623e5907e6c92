"""Options several commands share: finding the manifest (or a domain pack's copy) and the state directory."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import click

from crucible_core.errors import UsageError

if TYPE_CHECKING:
    from crucible_core.plugins import Plugins

manifest_option = click.option(
    "--manifest",
    "-m",
    type=click.Path(path_type=Path, dir_okay=False),
    default=Path("crucible.toml"),
    show_default=True,
    help="The run's crucible.toml.",
)
state_dir_option = click.option(
    "--state-dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Runtime state directory (default: <manifest dir>/state).",
)
pack_option = click.option(
    "--pack",
    default=None,
    metavar="NAME",
    help="An installed domain pack, in place of --manifest: its copy in ./NAME (made or refreshed "
    "by run, check and init).",
)
repo_option = click.option(
    "--repo",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="With --pack: the repository the pack improves (its [repo]), instead of the pack's own world.",
)
session_option = click.option(
    "--session",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="The run's session log (default: <state dir>/session.jsonl).",
)


def manifest_or_pack(
    manifest: Path, pack: str | None, repo: Path | None, *, prepare: bool, plugins: Plugins | None = None
) -> Path:
    """The manifest a command works on: --manifest, or the copy of --pack in ./NAME.

    `prepare`: make or refresh the copy (run, check, init); otherwise an earlier copy must exist.
    """
    if pack is None:
        if repo is not None:
            raise UsageError("--repo applies a domain pack to a repository", hint="pass --pack NAME with it")
        return manifest
    if plugins is None:
        from crucible_core.plugins import load_plugins

        plugins = load_plugins()
    packs = plugins.domain_packs()
    return packs.prepare(plugins, pack, repo) if prepare else packs.existing_manifest(pack)


def session_log_path(manifest: Path, state_dir: Path | None, session: Path | None) -> Path:
    """The session log a read-only command looks at: --session, else the manifest's state dir."""
    if session is not None:
        return session
    return (state_dir or manifest.parent / "state") / "session.jsonl"


def parse_params(values: tuple[str, ...]) -> dict[str, str]:
    """`--param NAME=VALUE` options as a mapping (the workflow's language types and checks each value)."""
    params: dict[str, str] = {}
    for value in values:
        name, sep, text = value.partition("=")
        if not sep or not name.strip() or not name.strip().isidentifier():
            raise UsageError(
                f"--param {value!r} is not NAME=VALUE", hint="for example --param issue_key=PROJ-42"
            )
        params[name.strip()] = text
    return params


def missing_log_hint(manifest: Path, session: Path | None) -> str:
    """What to do when a read-only command finds no session log where it looked.

    Run from a subdirectory, the default `crucible.toml` is not there: name the nearest manifest
    above instead of the path that just failed.
    """
    if session is not None:
        return "pass --session with a run's session.jsonl"
    if manifest.is_file():
        return f"has {manifest} run yet? (`crucible run -m {manifest}`)"
    from crucible_core.manifest.loader import manifest_above

    above = manifest_above(manifest)
    if above is not None:
        return f"no {manifest} here; pass -m {above}, or run from {above.parent}"
    return f"no {manifest} here: pass -m PATH/crucible.toml, or --session PATH/state/session.jsonl"


def budget_cap(cap: str) -> Callable[[click.Context, click.Parameter, str | None], int | float | None]:
    """The callback of --iterations or --max-cost: the cap bounded as the bridge bounds it.

    (--max-time is a duration, bounded by its own parser.)
    """

    def check(ctx: click.Context, param: click.Parameter, value: str | None) -> int | float | None:
        from crucible_core.control.caps import allowed_range, cap_value

        if value is None:
            return None
        try:
            number = float(value)
            return cap_value(cap, int(number) if cap == "iterations" and number.is_integer() else number)
        except ValueError:
            raise click.BadParameter(f"{value[:40]!r} is not {allowed_range(cap)}", ctx, param) from None

    return check
