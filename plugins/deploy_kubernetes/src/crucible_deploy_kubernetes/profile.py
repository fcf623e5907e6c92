"""The deploy profile: the per-cluster facts a manifest cannot know, validated as strictly as a manifest.

One small TOML file per cluster: namespaces, the service account, secret *names* (never their
contents), resources, the loop image tag and generic environment maps. Everything else the
renderer derives from the manifest.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import attrs

from crucible_core.api import ManifestError

# RFC 1123 label (namespaces, secret and service-account names are DNS subdomains; a label is
# the safe common subset) and a C-identifier-ish env name, the shapes the API server accepts.
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
SECRET_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")
QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$")


@attrs.frozen
class ClusterSection:
    namespace: str  # where the loop pod runs
    service_account: str  # the identity the loop pod runs as
    # namespaces the run may change (a RoleBinding grants the service account `edit` in each)
    target_namespaces: tuple[str, ...] = ()
    create_service_account: bool = True  # render the ServiceAccount too (off: it is provisioned elsewhere)


@attrs.frozen
class StateSection:
    """Where the run keeps its state: an existing claim, or a claim the render creates."""

    claim: str | None = None  # an existing PersistentVolumeClaim
    size: str = "1Gi"  # used when the render creates `<run>-state`
    storage_class: str | None = None
    access_mode: str = "ReadWriteOnce"


@attrs.frozen
class ImageSection:
    loop: str  # the crucible image (a tag; the render pins it to a digest)
    pull_secret: str | None = None  # imagePullSecrets entry for a private registry
    domains_root: str = "/opt/crucible/domains"  # where the image carries domain directories


@attrs.frozen
class ResourcesSection:
    cpu_request: str = "1"
    memory_request: str = "2Gi"
    cpu_limit: str = "4"
    memory_limit: str = "8Gi"
    gpu: int = 0  # nvidia.com/gpu limit for the loop pod


@attrs.frozen
class SecretEnv:
    """One environment variable the pod reads from a Secret (referenced by name, never held)."""

    name: str
    secret: str
    key: str


TASK_WORKSPACES = ("pack", "image")


@attrs.frozen
class TasksSection:
    """[tasks]: plan tasks this cluster runs as Jobs, for the capabilities it provides.

    capabilities: the `needs` values served here ("gpu", or a label of your own such as "a100").
    image: the image a task Job runs (unset: [image].loop); it needs /bin/sh, cp, tee and base64.
    workspace: "pack" ships a copy of the task's workspace to the pod: through `claim` when one
      is named, else in a ConfigMap (at most 900 KiB); "image" runs the command in `workdir` as
      the image carries it.
    claim: a ReadWriteMany PersistentVolumeClaim in the tasks' namespace that the runner and the
      Jobs share: the workspace travels on it as git objects (shared_tree.py), of any size.
    claim_mount: where this process finds that claim (the loop pod mounts it there).
    gpu: the nvidia.com/gpu limit of a task needing "gpu".
    schedule_timeout: seconds a Job may wait for its pod to start before the attempt is a
      transport failure (retried by the task's retries).
    node_selector: per capability, the node labels its Jobs are scheduled onto.
    log_lines: how many of an attempt's log lines go into the session log.
    service_account: the identity task pods run as. Unset, they get the namespace's default
      account with no API token mounted (automountServiceAccountToken: false), so a task cannot
      call the cluster's API; set it only for tasks that must, with the rights they need.
    """

    capabilities: tuple[str, ...] = ("gpu",)
    image: str | None = None
    workspace: str = "pack"
    workdir: str = "/work"
    gpu: int = 1
    cpu: str | None = None
    memory: str | None = None
    schedule_timeout: float = 300.0
    node_selector: dict[str, dict[str, str]] = attrs.field(factory=dict)
    env: dict[str, str] = attrs.field(factory=dict)
    secret_env: tuple[SecretEnv, ...] = ()
    log_lines: int = 200
    service_account: str | None = None
    claim: str | None = None
    claim_mount: str = "/var/lib/crucible-share"


@attrs.frozen
class DeployProfile:
    cluster: ClusterSection
    image: ImageSection
    state: StateSection = StateSection()
    resources: ResourcesSection = ResourcesSection()
    env: dict[str, str] = attrs.field(factory=dict)
    secret_env: tuple[SecretEnv, ...] = ()
    labels: dict[str, str] = attrs.field(factory=dict)  # extra labels on everything rendered
    node_selector: dict[str, str] = attrs.field(factory=dict)
    # [tasks]: absent, this cluster runs no plan tasks, and a loop pod gets no rights over Jobs
    tasks: TasksSection | None = None


def _task_problems(tasks: TasksSection) -> list[str]:
    out: list[str] = []
    if not tasks.capabilities:
        out.append('[tasks].capabilities is empty (name what this cluster provides, e.g. ["gpu"])')
    for i, capability in enumerate(tasks.capabilities):
        if not capability.strip() or capability == "any":
            out.append(f'[tasks].capabilities[{i}] = {capability!r}: name a capability ("any" runs here)')
    if tasks.image is not None and not tasks.image.strip():
        out.append("[tasks].image is empty (leave it out to use [image].loop)")
    if tasks.workspace not in TASK_WORKSPACES:
        out.append(f'[tasks].workspace = {tasks.workspace!r}: use "pack" or "image"')
    if not tasks.workdir.startswith("/"):
        out.append("[tasks].workdir must be an absolute path inside the image")
    if tasks.claim is not None:
        if not tasks.claim or len(tasks.claim) > 253 or not DNS_SUBDOMAIN.match(tasks.claim):
            out.append(f"[tasks].claim = {tasks.claim!r} is not a valid Kubernetes name")
        if tasks.workspace != "pack":
            out.append('[tasks].claim carries the workspace, which [tasks].workspace = "image" never ships')
    if not tasks.claim_mount.startswith("/") or tasks.claim_mount.rstrip("/") == "":
        out.append("[tasks].claim_mount must be an absolute path below the root")
    if tasks.gpu < 0:
        out.append("[tasks].gpu must be >= 0")
    for key in ("cpu", "memory"):
        value = getattr(tasks, key)
        if value is not None and not QUANTITY.match(value):
            out.append(f"[tasks].{key} = {value!r} is not a Kubernetes quantity (2, 500m, 4Gi)")
    if not 0 < tasks.schedule_timeout <= 86_400:
        out.append("[tasks].schedule_timeout must be between 0 and 86400 seconds")
    if not 0 <= tasks.log_lines <= 10_000:
        out.append("[tasks].log_lines must be between 0 and 10000")
    for capability in tasks.node_selector:
        if capability not in tasks.capabilities:
            out.append(f"[tasks.node_selector].{capability} names no capability in [tasks].capabilities")
    for key in tasks.env:
        if not ENV_NAME.match(key):
            out.append(f"[tasks.env].{key} is not a valid environment variable name")
    for i, entry in enumerate(tasks.secret_env):
        where = f"[[tasks.secret_env]][{i}]"
        if not ENV_NAME.match(entry.name):
            out.append(f"{where}.name = {entry.name!r} is not a valid environment variable name")
        if not entry.secret or len(entry.secret) > 253 or not DNS_SUBDOMAIN.match(entry.secret):
            out.append(f"{where}.secret = {entry.secret!r} is not a valid Kubernetes name")
        if not entry.key or not SECRET_KEY.match(entry.key):
            out.append(f"{where}.key = {entry.key!r} is not a valid Secret key")
    account = tasks.service_account
    if account is not None:
        if not account:
            out.append(
                "[tasks].service_account is empty (leave it out for no API access, or name the account)"
            )
        elif len(account) > 253 or not DNS_SUBDOMAIN.match(account):
            out.append(
                f"[tasks].service_account = {account!r} is not a valid Kubernetes name (lowercase, digits, '-', '.')"
            )
    return out


def _problems(profile: DeployProfile) -> list[str]:
    out: list[str] = []

    def name(value: str | None, where: str, pattern: re.Pattern[str] = DNS_LABEL) -> None:
        if value is None:
            return
        if not value:
            out.append(f"{where} is empty (name the Kubernetes object)")
        elif len(value) > 253 or not pattern.match(value):
            out.append(f"{where} = {value!r} is not a valid Kubernetes name (lowercase, digits, '-')")

    c = profile.cluster
    name(c.namespace, "[cluster].namespace")
    name(c.service_account, "[cluster].service_account", DNS_SUBDOMAIN)
    for i, ns in enumerate(c.target_namespaces):
        name(ns, f"[cluster].target_namespaces[{i}]")
    name(profile.state.claim, "[state].claim", DNS_SUBDOMAIN)
    if profile.state.access_mode not in ("ReadWriteOnce", "ReadWriteOncePod", "ReadWriteMany"):
        out.append(
            f"[state].access_mode = {profile.state.access_mode!r}: use ReadWriteOnce, "
            "ReadWriteOncePod or ReadWriteMany (the run writes its state)"
        )
    for key in ("size",):
        value = getattr(profile.state, key)
        if not QUANTITY.match(value):
            out.append(f"[state].{key} = {value!r} is not a Kubernetes quantity (1Gi, 500Mi)")
    if not profile.image.loop.strip():
        out.append("[image].loop is empty (name the crucible image, e.g. ghcr.io/org/crucible:0.1)")
    name(profile.image.pull_secret, "[image].pull_secret", DNS_SUBDOMAIN)
    if not profile.image.domains_root.startswith("/"):
        out.append("[image].domains_root must be an absolute path inside the image")
    r = profile.resources
    for key in ("cpu_request", "memory_request", "cpu_limit", "memory_limit"):
        value = getattr(r, key)
        if not QUANTITY.match(value):
            out.append(f"[resources].{key} = {value!r} is not a Kubernetes quantity (2, 500m, 4Gi)")
    if r.gpu < 0:
        out.append("[resources].gpu must be >= 0")
    for key in profile.env:
        if not ENV_NAME.match(key):
            out.append(f"[env].{key} is not a valid environment variable name")
    seen: set[str] = set()
    for i, entry in enumerate(profile.secret_env):
        where = f"[[secret_env]][{i}]"
        if not ENV_NAME.match(entry.name):
            out.append(f"{where}.name = {entry.name!r} is not a valid environment variable name")
        name(entry.secret, f"{where}.secret", DNS_SUBDOMAIN)
        if not entry.key:
            out.append(f"{where}.key is empty (name the key inside Secret {entry.secret!r})")
        elif not SECRET_KEY.match(entry.key):
            out.append(f"{where}.key = {entry.key!r} is not a valid Secret key")
        if entry.name in seen or entry.name in profile.env:
            out.append(f"{where}.name = {entry.name!r} is set twice (in [env] or another [[secret_env]])")
        seen.add(entry.name)
    if profile.tasks is not None:
        out.extend(_task_problems(profile.tasks))
    return out


def parse_profile(path: Path, raw: dict[str, Any]) -> DeployProfile:
    """Structure a parsed profile; every problem is reported at once, each with its key path."""
    from crucible_core.api import converter, describe_structure_error

    try:
        profile = converter.structure(raw, DeployProfile)
    except Exception as exc:  # cattrs raises several error types; all are profile errors here
        problems = describe_structure_error(exc)
        raise ManifestError(
            f"deploy profile {path}: {'; '.join(problems)}", hint="see docs/kubernetes.md for every key"
        ) from None
    problems = _problems(profile)
    if problems:
        raise ManifestError(
            f"deploy profile {path}: {'; '.join(problems)}", hint="see docs/kubernetes.md for every key"
        )
    return profile


def load_profile(path: Path) -> DeployProfile:
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ManifestError(
            f"deploy profile {path}: no such file", hint="pass --profile PATH (see examples/kubernetes/)"
        ) from None
    except OSError as exc:
        raise ManifestError(f"deploy profile {path}: cannot read it ({exc})") from None
    try:
        raw = tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ManifestError(f"deploy profile {path}: not valid TOML ({exc})", hint="fix the syntax") from None
    return parse_profile(path, raw)
