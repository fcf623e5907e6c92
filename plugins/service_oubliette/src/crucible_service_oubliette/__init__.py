"""crucible-service-oubliette: a catalog service tool that gives one run one disposable Oubliette cluster.

The plugin registers the installed tool (`crucible services list`, `crucible services catalog`)
under the name catalogs give it; a run still starts it only from the operator's catalog.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from crucible_core.api import hookimpl

if TYPE_CHECKING:
    from crucible_core.api import Register, ServiceTool, ServiceToolFactory

TOOL_NAME = "oubliette-cluster"
SCRIPT = "crucible-service-oubliette"  # the console script this distribution installs
DISTRIBUTION = "crucible-plugin-service-oubliette"
KUBECONFIG_NAME = "kubeconfig"  # the handoff file, in the directory the engine gives the tool


@hookimpl
def crucible_register_services(register: Register[ServiceToolFactory]) -> None:
    register(TOOL_NAME, _installed_tool)


def _installed_tool() -> ServiceTool:
    from crucible_service_oubliette.install import installed_tool  # deferred: `crucible plugins` stays cheap

    return installed_tool()
