"""Tasks as Kubernetes Jobs: the Job a plan task runs as, and the calls that run, watch, read and delete it.

This is the transport the Kubernetes task runner (task_runner.py) stands on. A task is a command in an image with env, a deadline and resources (a GPU when
the task needs one). The Job never retries on its own (backoffLimit 0): retrying is the
executor's policy, so every attempt is a Job of its own with its own name.
"""

from __future__ import annotations

import functools
import time
from typing import Any

import attrs
from kubernetes import client, watch

from crucible_deploy_kubernetes import cluster
from crucible_deploy_kubernetes import labels as L
from crucible_deploy_kubernetes.errors import ClusterError

TASK_CONTAINER = "task"
PACK_MOUNT = "/opt/crucible/task-pack"  # where a task's workspace ConfigMap is mounted
# Where a task pod sees the run's object store (read-only) and its attempt's directory on the
# shared claim (shared_tree.py): two subPath mounts, so a pod can write only its own attempt's.
SHARE_OBJECTS = "/opt/crucible/share/objects"
SHARE_ATTEMPT = "/opt/crucible/share/attempt"
# Reasons that say the attempt failed for the cluster's reasons, not the task's: retry-worthy.
TRANSPORT_REASONS = frozenset(
    {"Evicted", "DeadlineExceeded", "Preempted", "NodeLost", "UnexpectedAdmissionError"}
)


@attrs.frozen
class TaskSpec:
    name: str  # DNS label, unique per attempt
    namespace: str
    run: str  # the run the task belongs to (label crucible.dev/run)
    image: str
    command: tuple[str, ...]
    env: dict[str, str] = attrs.field(factory=dict)
    deadline_seconds: int | None = None
    gpu: int = 0
    cpu: str | None = None
    memory: str | None = None
    # None: the namespace's default account with no API token mounted (a task cannot call the API)
    service_account: str | None = None
    node_selector: dict[str, str] = attrs.field(factory=dict)
    pull_secret: str | None = None
    secret_env: tuple[tuple[str, str, str], ...] = ()  # (variable, Secret name, key): referenced, never held
    labels: dict[str, str] = attrs.field(factory=dict)  # extra labels (the task's name, the profile's)
    # A ConfigMap mounted read-only at `pack_mount`, its keys laid out as (key, path, mode).
    pack_configmap: str | None = None
    pack_items: tuple[tuple[str, str, int], ...] = ()
    pack_mount: str = PACK_MOUNT
    # The shared claim and the (subPath, mount path, read-only) mounts of it the pod gets.
    share_claim: str | None = None
    share_mounts: tuple[tuple[str, str, bool], ...] = ()


@attrs.frozen
class TaskOutcome:
    name: str
    succeeded: bool
    reason: str | None  # the Job's or pod's failure reason
    transport: bool  # the failure is the cluster's (eviction, deadline, preemption): retry-worthy
    log: str


def render_job(spec: TaskSpec) -> client.V1Job:
    limits: dict[str, str] = {}
    requests: dict[str, str] = {}
    if spec.gpu:
        limits["nvidia.com/gpu"] = str(spec.gpu)
    if spec.cpu:
        requests["cpu"] = spec.cpu
    if spec.memory:
        requests["memory"] = limits["memory"] = spec.memory
    labels = {
        **spec.labels,
        L.MANAGED_BY_KEY: L.MANAGED_BY_VALUE,
        L.RUN_LABEL: spec.run,
        L.MODE_LABEL: "task",
    }
    env = [client.V1EnvVar(name=k, value=v) for k, v in sorted(spec.env.items())]
    env += [
        client.V1EnvVar(
            name=variable,
            value_from=client.V1EnvVarSource(secret_key_ref=client.V1SecretKeySelector(name=secret, key=key)),
        )
        for variable, secret, key in spec.secret_env
    ]
    volumes: list[client.V1Volume] = []
    mounts: list[client.V1VolumeMount] = []
    if spec.pack_configmap is not None:
        items = [client.V1KeyToPath(key=k, path=p, mode=m) for k, p, m in spec.pack_items]
        volumes.append(
            client.V1Volume(
                name="pack",
                config_map=client.V1ConfigMapVolumeSource(name=spec.pack_configmap, items=items or None),
            )
        )
        mounts.append(client.V1VolumeMount(name="pack", mount_path=spec.pack_mount, read_only=True))
    if spec.share_claim is not None:
        volumes.append(
            client.V1Volume(
                name="share",
                persistent_volume_claim=client.V1PersistentVolumeClaimVolumeSource(
                    claim_name=spec.share_claim
                ),
            )
        )
        mounts += [
            client.V1VolumeMount(name="share", mount_path=path, sub_path=sub, read_only=read_only or None)
            for sub, path, read_only in spec.share_mounts
        ]
    container = client.V1Container(
        name=TASK_CONTAINER,
        image=spec.image,
        command=list(spec.command),
        env=env or None,
        resources=client.V1ResourceRequirements(limits=limits or None, requests=requests or None),
        security_context=client.V1SecurityContext(allow_privilege_escalation=False),
        volume_mounts=mounts or None,
    )
    return client.V1Job(
        api_version="batch/v1",
        kind="Job",
        metadata=client.V1ObjectMeta(name=spec.name, namespace=spec.namespace, labels=labels),
        spec=client.V1JobSpec(
            backoff_limit=0,
            active_deadline_seconds=spec.deadline_seconds,
            ttl_seconds_after_finished=3600,
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels=labels),
                spec=client.V1PodSpec(
                    restart_policy="Never",
                    service_account_name=spec.service_account,
                    # Only a task given an account of its own may reach the API with it.
                    automount_service_account_token=False if spec.service_account is None else None,
                    containers=[container],
                    node_selector=spec.node_selector or None,
                    image_pull_secrets=[client.V1LocalObjectReference(name=spec.pull_secret)]
                    if spec.pull_secret
                    else None,
                    volumes=volumes or None,
                ),
            ),
        ),
    )


class JobClient:
    """Create, await, read and delete task Jobs through the API (no kubectl)."""

    def __init__(self, api: client.ApiClient) -> None:
        self.api = api
        self.batch = client.BatchV1Api(api)
        self.core = client.CoreV1Api(api)

    def create(self, spec: TaskSpec) -> None:
        body = render_job(spec)
        cluster.call(
            f"creating Job {spec.namespace}/{spec.name}",
            lambda: self.batch.create_namespaced_job(spec.namespace, body, field_manager=L.FIELD_MANAGER),
        )

    def wait(self, namespace: str, name: str, *, timeout: float) -> tuple[bool, str | None]:
        """Watch the Job until it completes or fails: (succeeded, failure reason)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            w = watch.Watch()
            remaining = max(1, int(deadline - time.monotonic()))
            stream = cluster.call(
                f"watching Job {namespace}/{name}",
                functools.partial(
                    w.stream,
                    self.batch.list_namespaced_job,
                    namespace,
                    field_selector=f"metadata.name={name}",
                    timeout_seconds=remaining,
                ),
            )
            for event in cluster._guard(f"watching Job {namespace}/{name}", stream):
                if event["type"] == "DELETED":
                    w.stop()
                    return False, "Deleted"
                status = event["object"].status
                for condition in (status.conditions or []) if status else []:
                    if condition.status != "True":
                        continue
                    if condition.type == "Complete":
                        w.stop()
                        return True, None
                    if condition.type == "Failed":
                        w.stop()
                        return False, condition.reason or "Failed"
        raise ClusterError(f"Job {namespace}/{name} did not finish within {timeout:.0f}s")

    def pods(self, namespace: str, name: str) -> list[Any]:
        result = cluster.call(
            f"listing the pods of Job {namespace}/{name}",
            lambda: self.core.list_namespaced_pod(namespace, label_selector=f"job-name={name}"),
        )
        return list(result.items or [])

    def log(self, namespace: str, name: str) -> str:
        out = []
        for pod in self.pods(namespace, name):
            out.append(
                cluster.call(
                    f"reading the log of {pod.metadata.name}",
                    functools.partial(
                        self.core.read_namespaced_pod_log,
                        pod.metadata.name,
                        namespace,
                        container=TASK_CONTAINER,
                    ),
                )
                or ""
            )
        return "".join(out)

    def delete(self, namespace: str, name: str) -> None:
        """Delete the Job and its pods (cancellation); a Job already gone is fine."""
        try:
            cluster.call(
                f"deleting Job {namespace}/{name}",
                lambda: self.batch.delete_namespaced_job(name, namespace, propagation_policy="Foreground"),
            )
        except ClusterError as exc:
            if "answered 404" not in exc.message:
                raise

    def delete_run(self, namespace: str, run: str) -> int:
        """Delete every task Job of a run, and its task ConfigMaps (a cancelled run leaves none behind).

        Returns how many Jobs were deleted.
        """
        selector = f"{L.RUN_LABEL}={run},{L.MODE_LABEL}=task"
        result = cluster.call(
            f"listing the Jobs of run {run}",
            lambda: self.batch.list_namespaced_job(namespace, label_selector=selector),
        )
        names = [job.metadata.name for job in result.items or [] if job.metadata and job.metadata.name]
        for name in names:
            self.delete(namespace, name)
        maps = cluster.call(
            f"listing the task ConfigMaps of run {run}",
            lambda: self.core.list_namespaced_config_map(namespace, label_selector=selector),
        )
        for item in maps.items or []:
            if item.metadata is not None:
                self.delete_configmap(namespace, str(item.metadata.name))
        return len(names)

    def read(self, namespace: str, name: str) -> Any | None:
        """The Job as the API has it now, or None when it is gone."""
        try:
            return cluster.call(
                f"reading Job {namespace}/{name}", lambda: self.batch.read_namespaced_job(name, namespace)
            )
        except ClusterError as exc:
            if "answered 404" in exc.message:
                return None
            raise

    def create_configmap(self, namespace: str, body: client.V1ConfigMap) -> None:
        cluster.call(
            f"creating a ConfigMap in {namespace}",
            lambda: self.core.create_namespaced_config_map(namespace, body, field_manager=L.FIELD_MANAGER),
        )

    def delete_configmap(self, namespace: str, name: str) -> None:
        try:
            cluster.call(
                f"deleting ConfigMap {namespace}/{name}",
                lambda: self.core.delete_namespaced_config_map(name, namespace),
            )
        except ClusterError as exc:
            if "answered 404" not in exc.message:
                raise

    def open_log(self, namespace: str, pod: str, *, follow: bool) -> Any:
        """The task container's log as an unread HTTP response (stream it; close it to stop)."""
        return cluster.call(
            f"reading the log of {namespace}/{pod}",
            lambda: self.core.read_namespaced_pod_log(
                pod, namespace, container=TASK_CONTAINER, follow=follow, _preload_content=False
            ),
        )

    def run(self, spec: TaskSpec, *, timeout: float) -> TaskOutcome:
        """One attempt: create, wait, collect the log, classify the failure. The Job is left for its TTL."""
        self.create(spec)
        succeeded, reason = self.wait(spec.namespace, spec.name, timeout=timeout)
        pod_reasons = [
            p.status.reason for p in self.pods(spec.namespace, spec.name) if p.status and p.status.reason
        ]
        transport = not succeeded and bool({reason, *pod_reasons} & TRANSPORT_REASONS or reason == "Deleted")
        log = self.log(spec.namespace, spec.name)
        return TaskOutcome(spec.name, succeeded, pod_reasons[0] if pod_reasons else reason, transport, log)
