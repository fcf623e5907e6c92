"""`crucible services`: the run-service tools plugins install, and catalog entries for them.

Discovery and attestation meet here without merging: `list` shows what plugins registered
(crucible_register_services) and how the catalog named in CRUCIBLE_SERVICE_CATALOG stands
towards each, and `catalog` writes [[tool]] entries (name, executable, sha256, ...) in the format
a run reads. A run trusts only the catalog document, never the registrations (ADR-0053).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import click

from crucible_core.errors import PluginError

if TYPE_CHECKING:
    from crucible_core.services.catalog import Catalog, ServiceTool

HEADER = (
    "# Written by `crucible services catalog`: review it, then name this file in\n"
    "# CRUCIBLE_SERVICE_CATALOG. A run starts only the executables listed here, at these sha256.\n\n"
)


@click.group("services")
def command() -> None:
    """Run-service tools: what plugins installed, and catalog entries for them."""


def _installed() -> list[tuple[str, str, ServiceTool]]:
    """(name, plugin, tool) for every registered service tool, by name."""
    from crucible_core.plugins import load_plugins
    from crucible_core.services.catalog import ServiceTool

    found = []
    for entry in sorted(load_plugins().registry("service"), key=lambda e: e.name):
        try:
            tool = entry.value()
        except Exception as exc:
            raise PluginError(
                f"plugin {entry.plugin}: service tool {entry.name!r} raised {type(exc).__name__}: {exc}",
                hint="fix or uninstall the plugin, or leave it out with CRUCIBLE_LOAD_PLUGINS",
            ) from exc
        if not isinstance(tool, ServiceTool):
            raise PluginError(
                f"plugin {entry.plugin}: service tool {entry.name!r} is a {type(tool).__name__}, not a ServiceTool",
                hint="fix or uninstall the plugin, or leave it out with CRUCIBLE_LOAD_PLUGINS",
            )
        found.append((entry.name, entry.plugin, tool))
    return found


@command.command("list")
def list_tools() -> None:
    """List installed service tools: name, plugin, executable, and whether the catalog attests it.

    The last column compares the tool with the catalog CRUCIBLE_SERVICE_CATALOG names:
    `attested`, `not in the catalog`, or what differs (another executable, another sha256).
    """
    from crucible_core.services.catalog import CATALOG_ENV, load_catalog

    tools = _installed()
    if not tools:
        click.echo("no service tools installed (a plugin registers one with crucible_register_services)")
        return
    catalog = load_catalog(os.environ) if os.environ.get(CATALOG_ENV, "").strip() else None
    width = max(len(name) for name, _, _ in tools)
    for name, plugin, tool in tools:
        click.echo(f"{name:<{width}}  {plugin}  {tool.executable}  {_standing(catalog, name, tool)}")


def _standing(catalog: Catalog | None, name: str, tool: ServiceTool) -> str:
    if catalog is None:
        return "no catalog named (CRUCIBLE_SERVICE_CATALOG)"
    listed = catalog.entry(name)
    if listed is None:
        return "not in the catalog"
    if listed.executable != tool.executable:
        return f"the catalog names another executable ({listed.executable})"
    try:
        current = tool.entry(name).sha256
    except OSError as exc:
        return f"cannot read the executable: {exc.strerror or exc}"
    return "attested" if current == listed.sha256 else "the catalog pins another sha256"


@command.command("catalog")
@click.argument("names", nargs=-1)
@click.option(
    "--output",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Write the catalog to this file (replaced atomically) instead of standard output.",
)
def write_catalog(names: tuple[str, ...], output: Path | None) -> None:
    """Write catalog entries for installed service tools (all of them, or the NAMES given).

    Each [[tool]] entry carries the name, the executable's absolute path and its sha256 as it is
    now, the version, the transport and what the tool states about itself, in the format
    CRUCIBLE_SERVICE_CATALOG names for a run. Exit 12 for a name no plugin installed.
    """
    from crucible_core.manifest.paths import write_atomic
    from crucible_core.services.catalog import catalog_text

    tools = _installed()
    installed = {name: tool for name, _, tool in tools}
    unknown = [name for name in names if name not in installed]
    if unknown:
        raise PluginError(
            f"no installed plugin registers the service tool(s) {', '.join(unknown)}",
            hint=f"installed: {', '.join(installed) or 'none'} (`crucible services list`)",
        )
    entries = []
    for name in names or tuple(installed):
        try:
            entries.append(installed[name].entry(name))
        except OSError as exc:
            raise PluginError(
                f"service tool {name!r}: cannot read its executable {installed[name].executable}: "
                f"{exc.strerror or exc}",
                hint="reinstall the plugin that provides it (`crucible services list` names it)",
            ) from None
    text = HEADER + catalog_text(entries)
    if output is None:
        click.echo(text, nl=False)
        return
    write_atomic(output, text.encode())
    click.echo(
        f"wrote {len(entries)} catalog entr{'y' if len(entries) == 1 else 'ies'} to {output}", err=True
    )
