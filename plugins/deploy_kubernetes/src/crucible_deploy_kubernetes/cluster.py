"""The Kubernetes API calls crucible makes, through the official client: apply, wait, list, logs, exec.

Nothing here shells out to kubectl. Every API or transport failure becomes a ClusterError: one
line saying what failed and what to check, never a traceback.
"""

from __future__ import annotations

import contextlib
import functools
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

from kubernetes import client, config, watch
from kubernetes.client.exceptions import ApiException

if TYPE_CHECKING:
    import urllib3

from crucible_deploy_kubernetes import labels as L
from crucible_deploy_kubernetes.errors import ClusterError

T = TypeVar("T")
APPLY_CONTENT_TYPE = "application/apply-patch+yaml"
REQUEST_TIMEOUT = 30

# kind -> (API class, patch method, namespaced)
_APPLIERS: dict[str, tuple[str, str]] = {
    "ServiceAccount": ("CoreV1Api", "patch_namespaced_service_account"),
    "ConfigMap": ("CoreV1Api", "patch_namespaced_config_map"),
    "Secret": ("CoreV1Api", "patch_namespaced_secret"),
    "PersistentVolumeClaim": ("CoreV1Api", "patch_namespaced_persistent_volume_claim"),
    "Pod": ("CoreV1Api", "patch_namespaced_pod"),
    "Role": ("RbacAuthorizationV1Api", "patch_namespaced_role"),
    "RoleBinding": ("RbacAuthorizationV1Api", "patch_namespaced_role_binding"),
    "Job": ("BatchV1Api", "patch_namespaced_job"),
}


def connect(kubeconfig: Path | None = None, context: str | None = None) -> client.ApiClient:
    """An API client from --kubeconfig, $KUBECONFIG or ~/.kube/config, or the in-cluster account."""
    configuration = client.Configuration()
    try:
        config.load_kube_config(
            config_file=str(kubeconfig) if kubeconfig else None,
            context=context,
            client_configuration=configuration,
        )
    except (config.ConfigException, FileNotFoundError, OSError) as exc:
        if kubeconfig is not None:
            raise ClusterError(
                f"cannot load kubeconfig {kubeconfig}: {exc}", hint="check the --kubeconfig path"
            ) from None
        try:
            config.load_incluster_config(client_configuration=configuration)
        except config.ConfigException:
            raise ClusterError(
                f"no Kubernetes configuration found ({exc})",
                hint="pass --kubeconfig, set KUBECONFIG, or run inside a cluster",
            ) from None
    configuration.retries = 0  # an unreachable server is reported at once, not after retries
    return client.ApiClient(configuration)


def _describe(exc: ApiException) -> str:
    try:
        body = json.loads(exc.body or "{}")
        message = body.get("message") or exc.reason
    except (ValueError, AttributeError):
        message = exc.reason
    return f"{exc.status} {message}"


def call(what: str, fn: Callable[[], T]) -> T:
    """Run one API call; turn API refusals and transport failures into a one-line ClusterError."""
    import urllib3

    try:
        return fn()
    except ApiException as exc:
        hint = {
            401: "your credentials were refused: refresh the kubeconfig",
            403: "your account lacks RBAC for this: ask a cluster admin",
            404: "it does not exist: check the name and --namespace",
        }.get(exc.status or 0, "see the API server's message")
        raise ClusterError(f"{what}: the API server answered {_describe(exc)}", hint=hint) from None
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise ClusterError(
            f"{what}: the Kubernetes API is unreachable ({type(exc).__name__})",
            hint="check the cluster address in your kubeconfig and your network",
        ) from None


def apply(api: client.ApiClient, obj: Any) -> dict[str, Any]:
    """Server-side apply one typed object (field manager `crucible`, conflicts forced)."""
    from crucible_deploy_kubernetes.render import to_wire

    body = to_wire(obj)
    kind = body["kind"]
    api_class, method = _APPLIERS[kind]
    patch = getattr(getattr(client, api_class)(api), method)
    meta = body["metadata"]

    def run() -> Any:
        return patch(
            meta["name"],
            meta["namespace"],
            body,
            field_manager=L.FIELD_MANAGER,
            force=True,
            _content_type=APPLY_CONTENT_TYPE,
            _request_timeout=REQUEST_TIMEOUT,
        )

    result = call(f"applying {kind} {meta['namespace']}/{meta['name']}", run)
    wire: dict[str, Any] = api.sanitize_for_serialization(result)
    return wire


def wait_for_start(
    api: client.ApiClient, namespace: str, name: str, *, timeout: float, on_phase: Callable[[str], None]
) -> str:
    """Watch one pod until it runs (or ends); its phase. A pod stuck pulling or pending is an error."""
    core = client.CoreV1Api(api)
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        w = watch.Watch()
        remaining = max(1, int(deadline - time.monotonic()))
        stream = call(
            f"watching pod {namespace}/{name}",
            functools.partial(
                w.stream,
                core.list_namespaced_pod,
                namespace,
                field_selector=f"metadata.name={name}",
                timeout_seconds=remaining,
                _request_timeout=remaining + 5,
            ),
        )
        for event in _guard(f"watching pod {namespace}/{name}", stream):
            pod = event["object"]
            phase = (pod.status.phase if pod.status else None) or "Pending"
            if phase != last:
                on_phase(phase)
                last = phase
            waiting = _waiting_reason(pod)
            if waiting in (
                "ErrImagePull",
                "ImagePullBackOff",
                "CreateContainerConfigError",
                "InvalidImageName",
            ):
                w.stop()
                raise ClusterError(
                    f"pod {namespace}/{name} cannot start: {waiting}",
                    hint="check the image, its pull secret and every Secret the profile names",
                )
            if phase in ("Running", "Succeeded", "Failed"):
                w.stop()
                return phase
    raise ClusterError(
        f"pod {namespace}/{name} did not start within {timeout:.0f}s (last phase {last or 'unknown'})",
        hint="inspect it with `crucible ps`; scheduling or the image pull may be slow",
    )


def _waiting_reason(pod: Any) -> str | None:
    for status in (pod.status.container_statuses or []) if pod.status else []:
        if status.state and status.state.waiting and status.state.waiting.reason:
            return str(status.state.waiting.reason)
    return None


def _guard(what: str, iterator: Iterator[T]) -> Iterator[T]:
    """Iterate a streaming response, turning mid-stream failures into ClusterError."""
    while True:
        try:
            item = call(what, lambda: next(iterator))
        except StopIteration:
            return
        except ClusterError:
            raise
        yield item


def list_pods(api: client.ApiClient, namespace: str | None, selector: str) -> list[Any]:
    core = client.CoreV1Api(api)
    if namespace:
        result = call(
            f"listing pods in {namespace}",
            lambda: core.list_namespaced_pod(
                namespace, label_selector=selector, _request_timeout=REQUEST_TIMEOUT
            ),
        )
    else:
        result = call(
            "listing pods",
            lambda: core.list_pod_for_all_namespaces(
                label_selector=selector, _request_timeout=REQUEST_TIMEOUT
            ),
        )
    return list(result.items or [])


def read_pod(api: client.ApiClient, namespace: str, name: str) -> Any:
    core = client.CoreV1Api(api)
    return call(f"reading pod {namespace}/{name}", lambda: core.read_namespaced_pod(name, namespace))


def log_tail(api: client.ApiClient, namespace: str, name: str, lines: int) -> list[str]:
    core = client.CoreV1Api(api)
    text = call(
        f"reading the log of {namespace}/{name}",
        lambda: core.read_namespaced_pod_log(
            name, namespace, container=L.LOOP_CONTAINER, tail_lines=lines, _request_timeout=REQUEST_TIMEOUT
        ),
    )
    return (text or "").splitlines()


def follow_log(api: client.ApiClient, namespace: str, name: str, *, follow: bool = True) -> Iterator[str]:
    """The pod's log as lines, following it while the container runs."""
    core = client.CoreV1Api(api)
    # Without preloading the client hands back the raw urllib3 response, not the str it declares.
    response = cast(
        "urllib3.BaseHTTPResponse",
        call(
            f"streaming the log of {namespace}/{name}",
            lambda: core.read_namespaced_pod_log(
                name, namespace, container=L.LOOP_CONTAINER, follow=follow, _preload_content=False
            ),
        ),
    )
    pending = b""
    try:
        for chunk in _guard(f"streaming the log of {namespace}/{name}", response.stream(64 * 1024)):
            pending += chunk
            *complete, pending = pending.split(b"\n")
            for raw in complete:
                yield raw.decode("utf-8", "replace")
        if pending:
            yield pending.decode("utf-8", "replace")
    finally:
        with contextlib.suppress(Exception):
            response.release_conn()


def exec_in_pod(
    api: client.ApiClient, namespace: str, name: str, argv: list[str], timeout: float = 60
) -> tuple[int, str, str]:
    """Run argv in the loop container over the API's exec stream: (exit code, stdout, stderr)."""
    from kubernetes.stream import stream

    core = client.CoreV1Api(api)

    def run() -> Any:
        return stream(
            core.connect_get_namespaced_pod_exec,
            name,
            namespace,
            container=L.LOOP_CONTAINER,
            command=argv,
            stderr=True,
            stdin=False,
            stdout=True,
            tty=False,
            _preload_content=False,
        )

    ws = call(f"exec in {namespace}/{name}", run)
    try:
        ws.run_forever(timeout=timeout)
        out = ws.read_stdout() or ""
        err = ws.read_stderr() or ""
        code = ws.returncode
    finally:
        with contextlib.suppress(Exception):
            ws.close()
    return int(code or 0), out, err
