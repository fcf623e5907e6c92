"""crucible on Kubernetes: `deploy render|apply`, `ps`, `view --pod` and `remote steer|stop|status`.

The plugin registers CLI commands only; the Kubernetes client is imported inside them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from crucible_core.hookspecs import hookimpl

if TYPE_CHECKING:
    import click

    from crucible_core.registry import Register


@hookimpl
def crucible_register_commands(register: Register[click.Command]) -> None:
    from crucible_deploy_kubernetes.cli import deploy, ps_command, remote, view_command

    register("deploy", deploy)
    register("ps", ps_command)
    register("view", view_command)
    register("remote", remote)
