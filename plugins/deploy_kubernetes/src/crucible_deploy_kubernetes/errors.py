"""Errors the deploy commands raise: one line for the user, a documented exit code (docs/cli.md)."""

from __future__ import annotations

from crucible_core.api import CrucibleError, ExitCode


class ClusterError(CrucibleError):
    """The Kubernetes API server or an image registry is unreachable or refused a request."""

    exit_code = ExitCode.CLUSTER
