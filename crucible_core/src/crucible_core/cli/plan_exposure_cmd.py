"""`crucible plan exposure`: a manifest's resolved output bounds and disclosure, as JSON.

The controller reads this to learn what a pack may write and reach before it runs one. It is
the same declaration `crucible check` prints and the run enforces; no pack command runs.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from crucible_core.cli.options import manifest_option


@click.command("exposure")
@manifest_option
def command(manifest: Path) -> None:
    """Print {version, outputs, capabilities} for a manifest, without running anything in it.

    Exit 0 with the JSON on stdout; 10 when the manifest does not load or declares an unknown
    output kind, a target a kind does not take, or an open scope that admits everything.
    """
    from crucible_core.broker.service import declaration_for
    from crucible_core.manifest.loader import load_manifest
    from crucible_core.plugins import load_plugins

    plugins = load_plugins()
    loaded = load_manifest(manifest, plugins=plugins)
    declaration = declaration_for(plugins, loaded)
    click.echo(json.dumps(declaration.to_wire(), indent=2, sort_keys=True))
