"""The installed tool as a catalog would describe it: where pip put its script, and what it serves."""

from __future__ import annotations

import sysconfig
from importlib.metadata import Distribution, PackageNotFoundError, distribution
from pathlib import Path

from crucible_core.api import Handoff, ServiceTool
from crucible_service_oubliette import DISTRIBUTION, KUBECONFIG_NAME, SCRIPT


def installed_tool() -> ServiceTool:
    try:
        dist: Distribution | None = distribution(DISTRIBUTION)
    except PackageNotFoundError:  # imported from a source tree that was never installed
        dist = None
    return ServiceTool(
        executable=script_path(dist),
        version=dist.version if dist is not None else "0.0.0",
        transport="mcp-http",
        creates_external_resources=True,  # the cluster lives on the Oubliette host
        concurrent_clients=True,
        handoff=Handoff(
            file=KUBECONFIG_NAME,
            env="KUBECONFIG",
            target="the run's virtual cluster",
            scope="admin inside that cluster only",
        ),
    )


def script_path(dist: Distribution | None) -> Path:
    """The absolute path of the installed console script: from the distribution's record first,
    since a --user or --target install puts scripts outside this interpreter's own scheme."""
    for file in (dist.files or ()) if dist is not None else ():
        if file.name == SCRIPT and file.parent.name in ("bin", "Scripts"):
            return Path(str(file.locate())).resolve()
    return Path(sysconfig.get_path("scripts")) / SCRIPT
