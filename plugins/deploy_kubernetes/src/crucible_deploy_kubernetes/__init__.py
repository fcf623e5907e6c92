"""crucible on Kubernetes: `deploy render|apply`, `ps`, `view --pod` and `remote steer|stop|status`.

The plugin registers CLI commands only; the Kubernetes client is imported inside them.
"""

from __future__ import annotations

from crucible_core.hookspecs import hookimpl


@hookimpl
def crucible_register_commands(register) -> None:
    from crucible_deploy_kubernetes.cli import deploy, ps_command, remote, view_command

    register("deploy", deploy)
    register("ps", ps_command)
    register("view", view_command)
    register("remote", remote)
