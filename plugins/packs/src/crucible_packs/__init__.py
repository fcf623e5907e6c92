"""crucible-plugin-packs: installed domain packs run by name, and `crucible init` with its `command` template.

`--pack NAME [--repo PATH]` (run, check, init, show) copies a pack another plugin registered
through `crucible_register_packs` into ./NAME and runs it there (domain_pack.py); core only asks
this plugin for the copy through `crucible_domain_packs`. `crucible init` (init_cmd.py) writes
a registered template (`crucible_register_init_templates`) or a pack's copy; its `command`
template (command_template.py) starts a run that needs no agent. Only the registration lives here: the
modules load when a pack or the template is used, so `crucible plugins` does not pay for them,
and a run whose directory is no pack's copy (no marker file) does not load domain_pack.py either.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from crucible_core.api import hookimpl

if TYPE_CHECKING:  # type-only: naming them here loads nothing of core when plugins are listed
    import click

    from crucible_core.api import DomainPacks, InitTemplate, Plugins, Register

# What a pack's copy records of its pack (domain_pack.py writes and reads it).
MARKER = ".crucible-pack.json"


class _DomainPacks:
    """The DomainPacks core asks for at every run start (for the run identity's provenance):
    domain_pack.py is loaded only when a pack is run, checked, or a copy's marker is there."""

    def prepare(self, plugins: Plugins, name: str, repo: Path | None, base: Path | None = None) -> Path:
        from crucible_packs.domain_pack import InstalledPacks

        return InstalledPacks().prepare(plugins, name, repo, base)

    def existing_manifest(self, name: str) -> Path:
        from crucible_packs.domain_pack import InstalledPacks

        return InstalledPacks().existing_manifest(name)

    def needs(self, plugins: Plugins, name: str, repo: Path | None) -> list[tuple[str, str]]:
        from crucible_packs.domain_pack import InstalledPacks

        return InstalledPacks().needs(plugins, name, repo)

    def provenance(self, manifest_dir: Path) -> str | None:
        # A directory without the marker came from no pack (the marker's reader says None for
        # it too, as for any marker it cannot read): one failed lookup, as its read was.
        if not (manifest_dir / MARKER).exists():
            return None
        from crucible_packs.domain_pack import InstalledPacks

        return InstalledPacks().provenance(manifest_dir)


@hookimpl
def crucible_domain_packs() -> DomainPacks:
    return _DomainPacks()


@hookimpl
def crucible_register_commands(register: Register[click.Command]) -> None:
    from crucible_core.api import Deferred

    register("init", Deferred("crucible_packs.init_cmd:init_command"))


@hookimpl
def crucible_register_init_templates(register: Register[InitTemplate]) -> None:
    from crucible_core.api import Deferred

    # Deferred: InitTemplate is an attrs class, and listing plugins must build none (issue 27)
    register("command", Deferred(_command_template))


def _command_template() -> InitTemplate:
    from crucible_packs.command_template import TEMPLATE

    return TEMPLATE
