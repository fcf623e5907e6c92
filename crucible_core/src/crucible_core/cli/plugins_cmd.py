"""`crucible plugins`: what is installed, which hooks each plugin implements, and what it registered.

Everything is listed even when something is wrong; a plugin that failed to load and a name two
plugins registered are marked, and then the command exits 12 so scripts notice.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from crucible_core.errors import CrucibleError, ExitCode
from crucible_core.plugins import REGISTRATION_HOOKS, Plugins, load_plugins


def describe(plugins: Plugins) -> dict[str, Any]:
    registered: dict[str, dict[str, list[str]]] = {}
    conflicts: list[dict[str, Any]] = []
    problems: list[str] = []
    for kind in REGISTRATION_HOOKS:
        try:
            registry = plugins.registry(kind, strict=False)
        except CrucibleError as exc:  # a plugin's registration hook itself failed: list the rest
            problems.append(exc.render())
            continue
        for entry in registry:
            registered.setdefault(entry.plugin, {}).setdefault(kind, []).append(entry.name)
        for conflict in registry.conflicts.values():
            conflicts.append({"kind": kind, "name": conflict.name, "plugins": list(conflict.plugins)})
            for owner in conflict.plugins[1:]:  # the first holder is listed through the registry
                registered.setdefault(owner, {}).setdefault(kind, []).append(conflict.name)
            problems.append(conflict.error().render())
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
        "conflicts": conflicts,
        "problems": problems,
    }


def _render_names(kind: str, names: list[str], conflicts: list[dict[str, Any]]) -> str:
    clashing = {c["name"] for c in conflicts if c["kind"] == kind}
    return ", ".join(f"{n} (CONFLICT)" if n in clashing else n for n in sorted(set(names)))


@click.command("plugins")
@click.option("--json", "as_json", is_flag=True, help="Print the listing as JSON.")
def command(as_json: bool) -> None:
    """List installed plugins, their versions, hooks, registered names and load failures.

    Exit 0 when every plugin loaded and no name is registered twice, 12 otherwise (the listing
    is printed either way, with the problems marked).
    """
    report = describe(load_plugins())
    if as_json:
        click.echo(json.dumps(report, indent=2))
    else:
        for plugin in report["plugins"]:
            click.echo(f"{plugin['distribution']} {plugin['version']}  (entry point {plugin['name']})")
            click.echo(f"  hooks: {', '.join(plugin['hooks']) or '-'}")
            for kind, names in sorted(plugin["registered"].items()):
                click.echo(f"  {kind}: {_render_names(kind, names, report['conflicts'])}")
        for failure in report["failures"]:
            click.echo(
                f"FAILED {failure['distribution']} (entry point {failure['name']}): {failure['error']}"
            )
        for problem in report["problems"]:
            click.echo(f"PROBLEM {problem}")
    if report["failures"] or report["problems"]:
        sys.exit(int(ExitCode.PLUGIN))
