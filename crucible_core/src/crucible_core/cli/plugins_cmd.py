"""`crucible plugins`: what is installed, which hooks each plugin implements, and what it registered."""

from __future__ import annotations

import json
from typing import Any

import click

from crucible_core.errors import CrucibleError
from crucible_core.plugins import REGISTRATION_HOOKS, Plugins, load_plugins


def describe(plugins: Plugins) -> dict[str, Any]:
    registered: dict[str, dict[str, list[str]]] = {}
    problems: list[str] = []
    for kind in REGISTRATION_HOOKS:
        try:
            registry = plugins.registry(kind)
        except CrucibleError as exc:  # a duplicate name: still list everything else
            problems.append(exc.render())
            continue
        for entry in registry:
            registered.setdefault(entry.plugin, {}).setdefault(kind, []).append(entry.name)
    return {
        "plugins": [
            {
                "name": info.name,
                "distribution": info.distribution,
                "version": info.version,
                "module": info.module,
                "hooks": list(info.hooks),
                "registered": registered.get(info.distribution, {}),
            }
            for info in plugins.infos
        ],
        "failures": [
            {"name": f.name, "distribution": f.distribution, "error": f.error} for f in plugins.failures
        ],
        "problems": problems,
    }


@click.command("plugins")
@click.option("--json", "as_json", is_flag=True, help="Print the listing as JSON.")
def command(as_json: bool) -> None:
    """List installed plugins, their versions, hooks, registered names and load failures."""
    report = describe(load_plugins())
    if as_json:
        click.echo(json.dumps(report, indent=2))
        return
    for plugin in report["plugins"]:
        click.echo(f"{plugin['distribution']} {plugin['version']}  (entry point {plugin['name']})")
        click.echo(f"  hooks: {', '.join(plugin['hooks']) or '-'}")
        for kind, names in sorted(plugin["registered"].items()):
            click.echo(f"  {kind}: {', '.join(sorted(names))}")
    for failure in report["failures"]:
        click.echo(f"FAILED {failure['distribution']} (entry point {failure['name']}): {failure['error']}")
    for problem in report["problems"]:
        click.echo(f"PROBLEM {problem}")
