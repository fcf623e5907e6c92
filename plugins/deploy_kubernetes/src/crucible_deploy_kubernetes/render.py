"""Rendering a run's Kubernetes objects from a manifest and a deploy profile, as typed client models.

The loop pod (or the playbook pod), its ServiceAccount and RBAC, the state claim and, with
--pack, the ConfigMap that carries the domain directory. Everything is a `kubernetes.client`
model, so a field the API does not know cannot be written; YAML is a serialization of those
models. Decisions (what to render) are plain functions of their inputs; the only I/O is reading
the manifest directory and, when pinning, one registry request per image.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs
from kubernetes import client

from crucible_core.api import LoadedManifest, ManifestError, UsageError
from crucible_deploy_kubernetes import labels as L
from crucible_deploy_kubernetes.profile import DeployProfile, load_profile
from crucible_deploy_kubernetes.settings import DeploySettings

STATE_MOUNT = "/var/lib/crucible"  # the state volume; the run directory lives under it
RUN_DIR = f"{STATE_MOUNT}/run"
PACK_MOUNT = "/opt/crucible/pack"
CONFIGMAP_MAX_BYTES = 900 * 1024  # the API caps a ConfigMap at 1 MiB; keep headroom
PACK_SKIP = frozenset({"state", ".git", "__pycache__", ".venv"})
# Credentials a harness reads from the pod's environment; a render that supplies none of a
# harness's names fails before the pod would start without them.
HARNESS_CREDENTIALS: dict[str, tuple[str, ...]] = {
    "claude": ("ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN", "ANTHROPIC_AUTH_TOKEN"),
    "anthropic": ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"),
}

# The container's script. Paths and the run's flags arrive as env and "$@", never interpolated,
# so a manifest value cannot change the shell text.
LOOP_SCRIPT = """\
set -u
mkdir -p "$CRUCIBLE_RUN_DIR"
if [ ! -e "$CRUCIBLE_RUN_DIR/.crucible-staged" ]; then
  cp -RL "$CRUCIBLE_SOURCE_DIR/." "$CRUCIBLE_RUN_DIR/" && touch "$CRUCIBLE_RUN_DIR/.crucible-staged" || exit 70
fi
SESSION="$CRUCIBLE_RUN_DIR/state/session.jsonl"
FAILED="$CRUCIBLE_RUN_DIR/state/.crucible-failed"
if [ -e "$FAILED" ]; then
  # the run failed on an earlier start: a restart must not resume it into the same failure
  echo "the run failed earlier (exit $(cat "$FAILED")); fix the cause, then delete the run and apply again" >&2
  cat "$SESSION" 2>/dev/null
  exit "$(cat "$FAILED")"
fi
set -- --manifest "$CRUCIBLE_RUN_DIR/$CRUCIBLE_MANIFEST_FILE" --ui jsonl "$@"
if [ -s "$SESSION" ]; then
  cat "$SESSION"
  set -- "$@" --resume
fi
crucible run "$@"
rc=$?
echo "=== SESSION (rc=$rc) ==="
cat "$SESSION" 2>/dev/null
# A run that ended by its own decision (0 completed, 2 escalated, 3 stopped by an operator) is
# finished: exit 0 so the kubelet does not restart it (the outcome is the session log's shutdown
# line). A signal death restarts and resumes. Anything else is a failed run and a failed pod,
# and stays one across restarts.
case "$rc" in
  0|2|3) exit 0 ;;
esac
if [ "$rc" -ge 128 ]; then exit "$rc"; fi
mkdir -p "$CRUCIBLE_RUN_DIR/state" && echo "$rc" > "$FAILED"
exit "$rc"
"""

# A playbook runs through `crucible run` too (the manifest declares it); it is one-shot, and
# exits 0 iff its verdict is valid, so the pod's phase says whether the playbook passed.
PLAYBOOK_SCRIPT = """\
set -u
mkdir -p "$CRUCIBLE_RUN_DIR"
cp -RL "$CRUCIBLE_SOURCE_DIR/." "$CRUCIBLE_RUN_DIR/" || exit 70
crucible run --manifest "$CRUCIBLE_RUN_DIR/$CRUCIBLE_MANIFEST_FILE" --ui jsonl "$@"
rc=$?
echo "=== SESSION (rc=$rc) ==="
cat "$CRUCIBLE_RUN_DIR/state/session.jsonl" 2>/dev/null
exit "$rc"
"""


@attrs.frozen
class RenderOptions:
    iterations: int = 1
    max_cost: float | None = None
    max_time: str | None = None
    harness: str | None = None
    model: str | None = None
    playbook: bool = False
    params: tuple[tuple[str, str], ...] = ()
    pack: bool = False
    pack_configmap_name: str | None = None
    name: str | None = None  # the run's name; default: the manifest directory's name


@attrs.frozen
class Rendered:
    """The objects of one render, in apply order, plus the names `apply` waits on."""

    objects: tuple[Any, ...]
    namespace: str
    pod_name: str
    run: str
    image: str


def check_options(options: RenderOptions) -> None:
    """The mode rules: a playbook needs its ceilings and takes none of the loop's knobs."""
    if options.playbook:
        loop_only = [
            flag
            for flag, given in (
                ("--harness", options.harness is not None),
                ("--model", options.model is not None),
            )
            if given
        ]
        if loop_only:
            raise UsageError(
                f"{', '.join(loop_only)} apply to the agent loop, not to --playbook",
                hint="drop them; a playbook's tasks choose their own harness",
            )
        if not options.max_cost or options.max_cost <= 0 or not options.max_time:
            raise UsageError(
                "--playbook needs a positive --max-cost and a --max-time",
                hint="e.g. --max-cost 20 --max-time 2h: a playbook pod runs unattended",
            )
    elif options.params:
        raise UsageError("--param applies to --playbook only", hint="add --playbook or drop --param")
    if options.pack_configmap_name and not options.pack:
        raise UsageError("--pack-configmap-name needs --pack")


def required_credentials(loaded: LoadedManifest, options: RenderOptions) -> tuple[str, ...]:
    """Env names of which the pod needs at least one, for the harness the run will use."""
    agent = loaded.manifest.agent
    if options.playbook or agent.backend == "command":
        return ()
    return HARNESS_CREDENTIALS.get(options.harness or agent.harness, ())


def check_secrets(loaded: LoadedManifest, profile: DeployProfile, options: RenderOptions) -> None:
    needed = required_credentials(loaded, options)
    if not needed:
        return
    supplied = set(profile.env) | {s.name for s in profile.secret_env} | set(loaded.manifest.agent.env)
    if supplied.isdisjoint(needed):
        harness = options.harness or loaded.manifest.agent.harness
        raise ManifestError(
            f"the {harness!r} harness needs one of {', '.join(needed)} in the pod, and the profile "
            "names no Secret for it",
            hint=f'add [[secret_env]] name = "{needed[0]}", secret = "<secret name>", key = "<key>" '
            "to the profile (the Secret's contents stay in the cluster)",
        )


def _meta(
    name: str, namespace: str | None, run: str, profile: DeployProfile, mode: str
) -> client.V1ObjectMeta:
    labels = {
        **profile.labels,
        L.MANAGED_BY_KEY: L.MANAGED_BY_VALUE,
        "app.kubernetes.io/name": "crucible",
        L.RUN_LABEL: run,
        L.MODE_LABEL: mode,
    }
    return client.V1ObjectMeta(name=name, namespace=namespace, labels=labels)


def _run_args(options: RenderOptions) -> list[str]:
    if options.playbook:
        args = ["--max-cost", _number(options.max_cost), "--max-time", str(options.max_time)]
        for key, value in options.params:
            args += ["--param", f"{key}={value}"]
        return args
    args = ["--iterations", str(options.iterations)]
    if options.max_cost is not None:
        args += ["--max-cost", _number(options.max_cost)]
    if options.max_time:
        args += ["--max-time", options.max_time]
    if options.harness:
        args += ["--harness", options.harness]
    if options.model:
        args += ["--model", options.model]
    return args


def _number(value: float | None) -> str:
    return "0" if value is None else (str(int(value)) if float(value).is_integer() else repr(value))


def plain_files(directory: Path, skip_top: frozenset[str] = frozenset()) -> list[tuple[str, Path]]:
    """Every plain file below `directory` as (relative posix path, path), in a stable order.

    A symbolic link is never followed nor taken (it could reach outside the directory); the
    PACK_SKIP directories are left out at any depth, the `skip_top` ones at the top only.
    """
    found: list[tuple[str, Path]] = []
    for root, dirs, files in os.walk(directory, followlinks=False):
        rel_root = Path(root).relative_to(directory)
        dirs[:] = sorted(
            d for d in dirs if d not in PACK_SKIP and not (rel_root == Path(".") and d in skip_top)
        )
        for name in sorted(files):
            path = Path(root) / name
            if path.is_symlink() or not path.is_file():
                continue
            found.append(((rel_root / name).as_posix(), path))
    return found


def pack_files(directory: Path, workspace_dir: str) -> list[tuple[str, bytes]]:
    """The domain directory's files (relative posix path, bytes): no state, workspace or VCS data."""
    workspace_top = frozenset(Path(workspace_dir).parts[:1])  # empty when the workspace is the directory
    return [(rel, path.read_bytes()) for rel, path in plain_files(directory, workspace_top)]


def check_pack_delivery(loaded: LoadedManifest) -> None:
    """--pack ships files, never a repository (.git is left out): a pod that must clone a local
    [repo] path would only fail, so refuse it here."""
    repo = loaded.manifest.repo
    if repo is None or repo.path is None or loaded.manifest.workspace.setup_cmd:
        return
    raise ManifestError(
        f'--pack ships {loaded.dir} without its git data, so the pod has no repository at [repo] path = "{repo.path}" '
        "to clone",
        hint="name the repository with [repo] url, build the workspace with a [workspace] setup_cmd, "
        "or bake the domain with its repository into the image (drop --pack)",
    )


def _pack_configmap(
    loaded: LoadedManifest, name: str, namespace: str, run: str, profile: DeployProfile
) -> tuple[client.V1ConfigMap, list[client.V1KeyToPath]]:
    files = pack_files(loaded.dir, loaded.manifest.workspace.dir)
    total = sum(len(b) for _, b in files)
    if total > CONFIGMAP_MAX_BYTES:
        raise ManifestError(
            f"the domain directory {loaded.dir} holds {total} bytes, more than a ConfigMap carries "
            f"({CONFIGMAP_MAX_BYTES})",
            hint="bake the domain into the image instead of --pack, or slim the directory",
        )
    data: dict[str, str] = {}
    binary: dict[str, bytes | str] = {}
    items: list[client.V1KeyToPath] = []
    for index, (rel, raw) in enumerate(files):
        # ConfigMap keys cannot hold '/': a flat key per file, its real path in the volume items.
        key = f"f{index:03d}-{rel.replace('/', '.')}"[:253]
        try:
            data[key] = raw.decode("utf-8")
        except UnicodeDecodeError:
            binary[key] = base64.b64encode(raw).decode("ascii")
        mode = 0o755 if os.access(loaded.dir / rel, os.X_OK) else 0o644
        items.append(client.V1KeyToPath(key=key, path=rel, mode=mode))
    configmap = client.V1ConfigMap(
        api_version="v1",
        kind="ConfigMap",
        metadata=_meta(name, namespace, run, profile, "pack"),
        data=data or None,
        binary_data=binary or None,
    )
    return configmap, items


def render(
    loaded: LoadedManifest,
    profile: DeployProfile,
    options: RenderOptions,
    *,
    pin: Callable[[str], str] | None = None,
) -> Rendered:
    """Every object of the run, in apply order. `pin` resolves an image tag to a digest reference."""
    check_options(options)
    check_secrets(loaded, profile, options)
    check_deploy_tasks(loaded, playbook=options.playbook)
    run = L.run_name(options.name or loaded.dir.name)
    namespace = profile.cluster.namespace
    mode = "playbook" if options.playbook else "loop"
    pod_name = f"{run}-{mode}"
    sa = profile.cluster.service_account
    image = pin(profile.image.loop) if pin else profile.image.loop
    objects: list[Any] = []

    if profile.cluster.create_service_account:
        objects.append(
            client.V1ServiceAccount(
                api_version="v1", kind="ServiceAccount", metadata=_meta(sa, namespace, run, profile, mode)
            )
        )
    # The run's own namespace: read its pods and their logs.
    role_name = f"{run}-crucible"
    subject = client.RbacV1Subject(kind="ServiceAccount", name=sa, namespace=namespace)
    objects += _role_and_binding(
        role_name,
        namespace,
        [
            client.V1PolicyRule(
                api_groups=[""], resources=["pods", "pods/log"], verbs=["get", "list", "watch"]
            )
        ],
        subject,
        run,
        profile,
        mode,
    )
    # Task Jobs only when the manifest's [deploy] profile lets the run's tasks run as Jobs: a
    # loop that cannot start a Job is not given the right to.
    tasks = task_profile(loaded)
    if tasks is not None:
        objects += _role_and_binding(
            f"{run}-crucible-tasks", tasks.cluster.namespace, task_rules(), subject, run, profile, mode
        )
    # The namespaces the run changes (a rig, a staging deployment): the built-in `edit` role there.
    for target in profile.cluster.target_namespaces:
        objects.append(
            client.V1RoleBinding(
                api_version="rbac.authorization.k8s.io/v1",
                kind="RoleBinding",
                metadata=_meta(f"{run}-crucible-edit", target, run, profile, mode),
                role_ref=client.V1RoleRef(
                    api_group="rbac.authorization.k8s.io", kind="ClusterRole", name="edit"
                ),
                subjects=[subject],
            )
        )

    volumes: list[client.V1Volume] = []
    mounts: list[client.V1VolumeMount] = []
    if options.playbook:
        # One-shot: a second launch over kept state would republish the first launch's events
        # (or be refused, the run having ended). Nothing persists.
        volumes.append(client.V1Volume(name="state", empty_dir=client.V1EmptyDirVolumeSource()))
    else:
        claim = profile.state.claim
        if claim is None:
            claim = f"{run}-state"
            objects.append(
                client.V1PersistentVolumeClaim(
                    api_version="v1",
                    kind="PersistentVolumeClaim",
                    metadata=_meta(claim, namespace, run, profile, mode),
                    spec=client.V1PersistentVolumeClaimSpec(
                        access_modes=[profile.state.access_mode],
                        storage_class_name=profile.state.storage_class,
                        resources=client.V1VolumeResourceRequirements(
                            requests={"storage": profile.state.size}
                        ),
                    ),
                )
            )
        volumes.append(
            client.V1Volume(
                name="state",
                persistent_volume_claim=client.V1PersistentVolumeClaimVolumeSource(claim_name=claim),
            )
        )
    mounts.append(client.V1VolumeMount(name="state", mount_path=STATE_MOUNT))
    served = tasks.tasks if tasks is not None else None
    if tasks is not None and served is not None and served.claim is not None:
        share = served.claim
        # The run's task runner writes each attempt's workspace to this claim, which its Jobs
        # mount too (a claim is namespaced: the pod and the Jobs must share the namespace).
        if tasks.cluster.namespace != namespace:
            raise ManifestError(
                f"[tasks].claim {share!r} lives in the tasks' namespace {tasks.cluster.namespace!r}, "
                f"but the pod runs in {namespace!r}, where it cannot mount it",
                hint="run the pod in the tasks' namespace, or drop [tasks].claim (workspaces then travel "
                "in ConfigMaps of at most 900 KiB)",
            )
        volumes.append(
            client.V1Volume(
                name="share",
                persistent_volume_claim=client.V1PersistentVolumeClaimVolumeSource(claim_name=share),
            )
        )
        mounts.append(client.V1VolumeMount(name="share", mount_path=served.claim_mount))

    if options.pack:
        check_pack_delivery(loaded)
        cm_name = options.pack_configmap_name or f"{run}-pack"
        configmap, items = _pack_configmap(loaded, cm_name, namespace, run, profile)
        objects.append(configmap)
        volumes.append(
            client.V1Volume(name="pack", config_map=client.V1ConfigMapVolumeSource(name=cm_name, items=items))
        )
        mounts.append(client.V1VolumeMount(name="pack", mount_path=PACK_MOUNT, read_only=True))
        source = PACK_MOUNT
    else:
        source = f"{profile.image.domains_root.rstrip('/')}/{loaded.dir.name}"

    env = _env(run, image, source, loaded.path.name, profile, options)
    limits = {"cpu": profile.resources.cpu_limit, "memory": profile.resources.memory_limit}
    if profile.resources.gpu:
        limits["nvidia.com/gpu"] = str(profile.resources.gpu)
    container = client.V1Container(
        name=L.LOOP_CONTAINER,
        image=image,
        image_pull_policy="IfNotPresent",
        command=["/bin/sh", "-c", PLAYBOOK_SCRIPT if options.playbook else LOOP_SCRIPT, "crucible-pod"],
        args=_run_args(options),
        env=env,
        volume_mounts=mounts,
        resources=client.V1ResourceRequirements(
            requests={"cpu": profile.resources.cpu_request, "memory": profile.resources.memory_request},
            limits=limits,
        ),
        security_context=client.V1SecurityContext(allow_privilege_escalation=False),
    )
    annotations = {L.IMAGE_TAG_ANNOTATION: profile.image.loop}
    if not options.playbook:
        annotations[L.ITERATIONS_ANNOTATION] = str(options.iterations)
    metadata = _meta(pod_name, namespace, run, profile, mode)
    metadata.annotations = annotations
    pod = client.V1Pod(
        api_version="v1",
        kind="Pod",
        metadata=metadata,
        spec=client.V1PodSpec(
            service_account_name=sa,
            # The loop restarts into --resume; a playbook is one-shot.
            restart_policy="Never" if options.playbook else "OnFailure",
            termination_grace_period_seconds=120,  # SIGTERM stops the run at its next safe point
            image_pull_secrets=[client.V1LocalObjectReference(name=profile.image.pull_secret)]
            if profile.image.pull_secret
            else None,
            node_selector=dict(profile.node_selector) or None,
            containers=[container],
            volumes=volumes,
        ),
    )
    objects.append(pod)
    return Rendered(tuple(objects), namespace, pod_name, run, image)


def task_rules() -> list[client.V1PolicyRule]:
    """What the Job task runner does in the tasks' namespace (task_runner.py, jobs.py)."""
    verbs = ["create", "get", "list", "watch", "delete"]
    return [
        client.V1PolicyRule(api_groups=["batch"], resources=["jobs"], verbs=list(verbs)),
        # a task Job's workspace travels in a ConfigMap the runner creates and deletes
        client.V1PolicyRule(api_groups=[""], resources=["configmaps"], verbs=list(verbs)),
        # find a Job's pod, read why it failed, follow its log
        client.V1PolicyRule(api_groups=[""], resources=["pods", "pods/log"], verbs=["get", "list"]),
    ]


def check_deploy_tasks(loaded: LoadedManifest, *, playbook: bool) -> None:
    """A pod whose run would open the `[deploy]` profile's task runner, naming a profile without
    `[tasks]`, is refused now rather than when the pod starts (its run would refuse that profile
    before doing anything). A playbook's run always opens it; a loop opens it when the judge
    or the wide round needs a capability (`needs`) or the manifest authors its own graph."""
    deploy: DeploySettings | None = loaded.deploy_settings
    if deploy is None or deploy.profile is None:
        return
    m = loaded.manifest
    opens_runner = (
        playbook
        or (m.judge is not None and m.judge.needs is not None)
        or (m.search is not None and m.search.get("needs") is not None)  # [search] as written
        or m.workflow is not None
        or (loaded.dir / "workflow.star").is_file()
    )
    if not opens_runner:
        return
    path = loaded.dir / deploy.profile
    if load_profile(path).tasks is None:
        who = "the playbook pod's run" if playbook else "the loop pod's run"
        raise ManifestError(
            f"the manifest's [deploy].profile names {path}, which has no [tasks] section: "
            f"{who} would refuse it at start",
            hint='add [tasks] with capabilities = ["gpu"] to that profile '
            "(docs/kubernetes.md#plan-tasks-as-jobs), or drop [deploy].profile from the manifest",
        )


def task_profile(loaded: LoadedManifest) -> DeployProfile | None:
    """The profile the manifest's `[deploy]` names, when its `[tasks]` lets the run's tasks run as Jobs."""
    deploy: DeploySettings | None = loaded.deploy_settings
    if deploy is None or deploy.profile is None:
        return None
    named = load_profile(loaded.dir / deploy.profile)  # the loader checked it is a file beside the manifest
    return named if named.tasks is not None else None


def _role_and_binding(
    name: str,
    namespace: str,
    rules: list[client.V1PolicyRule],
    subject: client.RbacV1Subject,
    run: str,
    profile: DeployProfile,
    mode: str,
) -> list[Any]:
    """A Role in `namespace` and the RoleBinding that grants it to the pod's service account."""
    return [
        client.V1Role(
            api_version="rbac.authorization.k8s.io/v1",
            kind="Role",
            metadata=_meta(name, namespace, run, profile, mode),
            rules=rules,
        ),
        client.V1RoleBinding(
            api_version="rbac.authorization.k8s.io/v1",
            kind="RoleBinding",
            metadata=_meta(name, namespace, run, profile, mode),
            role_ref=client.V1RoleRef(api_group="rbac.authorization.k8s.io", kind="Role", name=name),
            subjects=[subject],
        ),
    ]


def _env(
    run: str, image: str, source: str, manifest_file: str, profile: DeployProfile, options: RenderOptions
) -> list[client.V1EnvVar]:
    def plain(name: str, value: str) -> client.V1EnvVar:
        return client.V1EnvVar(name=name, value=value)

    def field(name: str, path: str) -> client.V1EnvVar:
        return client.V1EnvVar(
            name=name,
            value_from=client.V1EnvVarSource(field_ref=client.V1ObjectFieldSelector(field_path=path)),
        )

    env = [
        plain("CRUCIBLE_RUN_NAME", run),
        plain("CRUCIBLE_LOOP_IMAGE", image),
        plain("CRUCIBLE_SOURCE_DIR", source),
        plain("CRUCIBLE_RUN_DIR", RUN_DIR),
        plain("CRUCIBLE_MANIFEST_FILE", manifest_file),
        field("CRUCIBLE_POD_NAME", "metadata.name"),
        field("CRUCIBLE_POD_NAMESPACE", "metadata.namespace"),
    ]
    if not options.playbook:
        env.append(plain("CRUCIBLE_ITERATIONS", str(options.iterations)))
    env += [plain(k, v) for k, v in sorted(profile.env.items())]
    env += [
        client.V1EnvVar(
            name=s.name,
            value_from=client.V1EnvVarSource(
                secret_key_ref=client.V1SecretKeySelector(name=s.secret, key=s.key)
            ),
        )
        for s in profile.secret_env
    ]
    return env


def to_wire(obj: Any) -> dict[str, Any]:
    """A typed model as the API's JSON shape (camelCase keys, None fields dropped)."""
    wire: dict[str, Any] = client.ApiClient().sanitize_for_serialization(obj)
    return wire


def to_yaml(objects: Sequence[Any]) -> str:
    import yaml

    class Dumper(yaml.SafeDumper):
        pass

    def text(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
        # Scripts and files read as written: multi-line strings as literal blocks.
        style = "|" if "\n" in value and not any(line.endswith(" ") for line in value.split("\n")) else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    Dumper.add_representer(str, text)
    docs = [to_wire(o) for o in objects]
    return yaml.dump_all(docs, Dumper=Dumper, sort_keys=True, default_flow_style=False, width=100)
