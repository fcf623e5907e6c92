"""The manifest's `[deploy]` table: which deploy profile runs this run's tasks, and how to reach its cluster."""

from __future__ import annotations

import attrs


@attrs.frozen
class DeploySettings:
    """[deploy] (docs/kubernetes.md): the deploy profile, relative to the manifest and beside it
    (core checks it is a file there: registered with `files=("profile",)`), and optionally the
    kubeconfig and context that reach the cluster. The specification's build/deploy target keys
    are refused as unknown keys."""

    profile: str | None = None
    kubeconfig: str | None = None  # unset: $KUBECONFIG, ~/.kube/config, or the in-cluster account
    context: str | None = None
