"""crucible on Kubernetes: `deploy render|apply`, `ps`, `view --pod`, `remote steer|stop|status`, task Jobs.

The plugin registers CLI commands and the `kubernetes` task runner; the Kubernetes client is
imported only inside them, when one runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from crucible_core.api import Deferred, hookimpl

if TYPE_CHECKING:
    import click

    from crucible_core.api import Register, TaskRunner, TaskRunnerContext, TaskRunnerFactory


@hookimpl
def crucible_register_commands(register: Register[click.Command]) -> None:
    # Deferred: the commands (and click's option machinery for them) are built when one runs or
    # help is shown, not each time plugins are listed.
    register("deploy", Deferred("crucible_deploy_kubernetes.cli:deploy"))
    register("ps", Deferred("crucible_deploy_kubernetes.cli:ps_command"))
    register("view", Deferred("crucible_deploy_kubernetes.cli:view_command"))
    register("remote", Deferred("crucible_deploy_kubernetes.cli:remote"))


def _open_task_runner(context: TaskRunnerContext) -> TaskRunner | None:
    from crucible_deploy_kubernetes.task_runner import open_runner

    return open_runner(context)


@hookimpl
def crucible_register_task_runners(register: Register[TaskRunnerFactory]) -> None:
    # The runner owns the manifest's [deploy] table; core checks `profile` names a file beside it.
    register(
        "kubernetes",
        _open_task_runner,
        settings="crucible_deploy_kubernetes.settings:DeploySettings",
        files=("profile",),
    )
