"""`crucible workflow`: compile a manifest's workflow source to its `[workflow]` IR, print its launch schema.

The source is compiled by the installed language plugin for its suffix (workflow.star: the
Starlark plugin); a manifest's own `[[workflow.task]]` tables need no plugin.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from crucible_core.cli.options import manifest_option, parse_params
from crucible_core.errors import ManifestError

if TYPE_CHECKING:
    from crucible_core.manifest.loader import LoadedManifest
    from crucible_core.plugins import Plugins


@click.group("workflow")
def command() -> None:
    """Workflows: compile workflow.star, print its parameters."""


@command.command("compile")
@manifest_option
@click.option("--format", "fmt", type=click.Choice(("toml", "json")), default="toml", show_default=True)
@click.option(
    "--param", "params", multiple=True, metavar="NAME=VALUE", help="A launch parameter (repeatable)."
)
def compile_(manifest: Path, fmt: str, params: tuple[str, ...]) -> None:
    """Compile and validate the manifest's workflow; print the generated [workflow] table.

    Exit 0 when it compiles and validates, 10 with every diagnostic (file:line:col) otherwise,
    12 when no installed plugin compiles the source's language (the message names the one to install).
    """
    from crucible_core.plugins import load_plugins
    from crucible_core.workflow import pack

    plugins = load_plugins()
    _loaded, document = compiled(plugins, manifest, parse_params(params))
    click.echo(pack.to_toml(document) if fmt == "toml" else pack.to_json(document), nl=fmt == "json")


@command.command("params")
@manifest_option
def params_(manifest: Path) -> None:
    """Print the workflow's launch parameters as a JSON Schema document (nothing is evaluated)."""
    from crucible_core.manifest.loader import load_manifest
    from crucible_core.plugins import load_plugins
    from crucible_core.workflow.pack import declared_params

    plugins = load_plugins()
    loaded = load_manifest(manifest, plugins=plugins)
    click.echo(json.dumps(declared_params(plugins, loaded), indent=2))


def compiled(
    plugins: Plugins, manifest: Path, params: dict[str, str]
) -> tuple[LoadedManifest, dict[str, Any]]:
    """Load the manifest, compile its workflow, and validate the result as a plan of its lane."""
    from crucible_core.manifest.loader import load_manifest
    from crucible_core.workflow import pack

    loaded = load_manifest(manifest, plugins=plugins)
    document = pack.effective_workflow(plugins, loaded, params)
    if document is None:
        raise ManifestError(
            f"{manifest}: no workflow.star beside it and no [workflow] in it",
            hint="write a workflow.star (see `crucible help workflows`)",
        )
    pack.validate_document(plugins, document, source=str(manifest))
    return loaded, document
