"""crucible on Kubernetes: `deploy render|apply`, `ps`, `view --pod`, `remote steer|stop|status`, task Jobs.

The plugin registers CLI commands and the `kubernetes` task runner; the Kubernetes client is
imported only inside them, when one runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from crucible_core.hookspecs import hookimpl

if TYPE_CHECKING:
    import click

    from crucible_core.plan.runners import TaskRunner, TaskRunnerContext, TaskRunnerFactory
    from crucible_core.registry import Register


@hookimpl
def crucible_register_commands(register: Register[click.Command]) -> None:
    from crucible_deploy_kubernetes.cli import deploy, ps_command, remote, view_command

    register("deploy", deploy)
    register("ps", ps_command)
    register("view", view_command)
    register("remote", remote)


def _open_task_runner(context: TaskRunnerContext) -> TaskRunner | None:
    from crucible_deploy_kubernetes.task_runner import open_runner

    return open_runner(context)


@hookimpl
def crucible_register_task_runners(register: Register[TaskRunnerFactory]) -> None:
    from crucible_deploy_kubernetes.settings import DeploySettings

    # The runner owns the manifest's [deploy] table; core checks `profile` names a file beside it.
    register("kubernetes", _open_task_runner, settings=DeploySettings, files=("profile",))
