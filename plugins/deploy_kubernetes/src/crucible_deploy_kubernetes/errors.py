"""Errors the deploy commands raise: one line for the user, a documented exit code (docs/cli.md)."""

from __future__ import annotations

from crucible_core.errors import CrucibleError, ExitCode


class ClusterError(CrucibleError):
    """The Kubernetes API server or an image registry is unreachable or refused a request.

    Core's exit code for a remote system a plugin drives (15, docs/cli.md); this plugin gives it
    its Kubernetes meaning.
    """

    exit_code = ExitCode.REMOTE
