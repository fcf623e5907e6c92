"""crucible-plugin-packs: installed domain packs run by name, and `crucible init` with its `command` template.

`--pack NAME [--repo PATH]` (run, check, init, show) copies a pack another plugin registered
through `crucible_register_packs` into ./NAME and runs it there (domain_pack.py); core only asks
this plugin for the copy through `crucible_domain_packs`. `crucible init` (init_cmd.py) writes
a registered template (`crucible_register_init_templates`) or a pack's copy; its `command`
template (command_template.py) starts a run that needs no agent. Only the registration lives here: the
modules load when a pack or the template is used, so `crucible plugins` does not pay for them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from crucible_core.api import hookimpl

if TYPE_CHECKING:  # type-only: naming them here loads nothing of core when plugins are listed
    import click

    from crucible_core.api import DomainPacks, InitTemplate, Register


@hookimpl
def crucible_domain_packs() -> DomainPacks:
    from crucible_packs.domain_pack import InstalledPacks

    return InstalledPacks()


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
