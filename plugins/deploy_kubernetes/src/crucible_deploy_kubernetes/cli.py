"""The CLI commands this plugin adds: `deploy render|apply`, `ps`, `view --pod`, `remote steer|stop|status`.

Only click is imported here; the Kubernetes client loads inside a command's body, so
`crucible --help` and every other command stay free of it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from crucible_core.api import ControlError, UsageError, budget_cap, manifest_option

DEFAULT_ITERATIONS = 10
START_TIMEOUT = 300.0

_kubeconfig = click.option(
    "--kubeconfig",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or the in-cluster account).",
)
_context = click.option("--context", default=None, help="Kubeconfig context (default: the current one).")


def _refuse(flag: str, why: str) -> Any:
    def check(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
        if value:
            raise UsageError(f"{flag} is not supported by this version: {why}")
        return value

    return click.option(flag, is_flag=True, hidden=True, expose_value=False, callback=check)


def _refuse_value(flag: str, why: str) -> Any:
    def check(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
        if value is not None:
            raise UsageError(f"{flag} is not supported by this version: {why}")
        return value

    return click.option(flag, default=None, hidden=True, expose_value=False, callback=check)


def _render_options(func: Any) -> Any:
    decorators = [
        manifest_option,  # as every other command: default ./crucible.toml
        click.option(
            "--profile",
            "-p",
            type=click.Path(path_type=Path, dir_okay=False),
            required=True,
            help="The cluster's deploy profile (TOML; see docs/kubernetes.md).",
        ),
        click.option("--name", default=None, help="The run's name (default: the manifest directory's name)."),
        click.option(
            "--iterations",
            "-n",
            default=None,
            callback=budget_cap("iterations"),  # bounded here as the pod's `crucible run` bounds it
            help=f"Agent turns the loop pod runs (default {DEFAULT_ITERATIONS}).",
        ),
        click.option("--max-cost", default=None, callback=budget_cap("max_cost"), help="USD ceiling."),
        click.option("--max-time", default=None, help="Active wall-clock ceiling (90s, 15m, 2h)."),
        click.option("--harness", default=None, help="Override [agent].harness in the pod."),
        click.option("--model", default=None, help="Override [agent].model in the pod."),
        click.option("--no-pin", is_flag=True, help="Use the image tag as written (no registry lookup)."),
        click.option(
            "--pack", is_flag=True, help="Ship the manifest directory in a ConfigMap instead of the image."
        ),
        click.option("--pack-configmap-name", default=None, help="The ConfigMap's name with --pack."),
        click.option(
            "--playbook",
            is_flag=True,
            help="Render the playbook pod (one `crucible run` of the playbook); needs --max-cost and --max-time.",
        ),
        click.option("--param", "params", multiple=True, metavar="NAME=VALUE", help="A playbook parameter."),
        _refuse_value("--pr-repo", "publish-on-keep (draft pull requests) is not part of this crucible"),
        _refuse_value(
            "--clusters", "fleet files and delegated measure clusters are not part of this crucible"
        ),
        _refuse("--controller", "the outer-loop controller is not part of this crucible"),
    ]
    for decorate in reversed(decorators):
        func = decorate(func)
    return func


def _prepare(
    manifest: Path,
    profile: Path,
    name: str | None,
    iterations: int | None,
    max_cost: float | None,
    max_time: str | None,
    harness: str | None,
    model: str | None,
    no_pin: bool,
    pack: bool,
    pack_configmap_name: str | None,
    playbook: bool,
    params: tuple[str, ...],
) -> Any:
    from crucible_core.api import load_manifest, parse_duration
    from crucible_deploy_kubernetes.images import resolve_digest
    from crucible_deploy_kubernetes.profile import load_profile
    from crucible_deploy_kubernetes.render import RenderOptions, render

    if playbook and iterations is not None:
        raise UsageError("--iterations applies to the agent loop, not to --playbook")
    if max_time is not None:
        parse_duration(max_time)  # refuse a bad duration here, not in the pod
    pairs = []
    for item in params:
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise UsageError(f"--param {item!r} is not NAME=VALUE")
        pairs.append((key, value))
    options = RenderOptions(
        iterations=DEFAULT_ITERATIONS if iterations is None else iterations,
        max_cost=max_cost,
        max_time=max_time,
        harness=harness,
        model=model,
        playbook=playbook,
        params=tuple(pairs),
        pack=pack,
        pack_configmap_name=pack_configmap_name,
        name=name,
    )
    loaded = load_manifest(manifest)
    deploy_profile = load_profile(profile)
    return render(loaded, deploy_profile, options, pin=None if no_pin else resolve_digest)


@click.group("deploy")
def deploy() -> None:
    """Render or apply a run's Kubernetes objects: the loop pod, its RBAC and state claim.

    Exit codes: 10 bad manifest or profile (a missing secret name included); 15 the API server
    or the image registry is unreachable or refused; 64 usage. See docs/kubernetes.md.
    """


@deploy.command("render")
@_render_options
def render_command(**kwargs: Any) -> None:
    """Print the run's objects as YAML (ServiceAccount, RBAC, state claim, pod) for review or GitOps."""
    from crucible_deploy_kubernetes.render import to_yaml

    rendered = _prepare(**kwargs)
    click.echo(to_yaml(rendered.objects), nl=False)


@deploy.command("apply")
@_render_options
@_kubeconfig
@_context
@click.option(
    "--timeout",
    type=click.FloatRange(min=1),
    default=START_TIMEOUT,
    show_default=True,
    help="Seconds to wait for the pod to start.",
)
@click.option("--no-wait", is_flag=True, help="Return once the objects are applied.")
def apply_command(
    kubeconfig: Path | None, context: str | None, timeout: float, no_wait: bool, **kwargs: Any
) -> None:
    """Render, server-side apply every object, then wait for the pod to start."""
    from crucible_deploy_kubernetes import cluster

    rendered = _prepare(**kwargs)
    api = cluster.connect(kubeconfig, context)
    for obj in rendered.objects:
        cluster.apply(api, obj)
        click.echo(f"applied {obj.kind} {obj.metadata.namespace}/{obj.metadata.name}")
    if no_wait:
        return
    phase = cluster.wait_for_start(
        api,
        rendered.namespace,
        rendered.pod_name,
        timeout=timeout,
        on_phase=lambda p: click.echo(f"pod {rendered.namespace}/{rendered.pod_name}: {p}"),
    )
    click.echo(
        f"run {rendered.run} is {phase.lower()}: `crucible view --pod {rendered.pod_name} "
        f"--namespace {rendered.namespace}` follows it"
    )


@click.command("ps")
@click.option("--namespace", default=None, help="One namespace (default: every namespace you can list).")
@click.option("--json", "as_json", is_flag=True, help="Print the rows as a JSON array.")
@_kubeconfig
@_context
def ps_command(namespace: str | None, as_json: bool, kubeconfig: Path | None, context: str | None) -> None:
    """List crucible pods (label app.kubernetes.io/managed-by=crucible): phase, age, iteration, best."""
    from crucible_deploy_kubernetes import cluster
    from crucible_deploy_kubernetes.ps import collect, format_table

    rows = collect(cluster.connect(kubeconfig, context), namespace)
    if as_json:
        click.echo(json.dumps([r.to_json() for r in rows], indent=2))
    else:
        click.echo(format_table(rows), nl=False)


def _namespace(namespace: str | None, kubeconfig: Path | None, context: str | None) -> str:
    if namespace:
        return namespace
    from kubernetes import config

    try:
        _, current = config.list_kube_config_contexts(config_file=str(kubeconfig) if kubeconfig else None)
        if context:
            contexts, _ = config.list_kube_config_contexts(
                config_file=str(kubeconfig) if kubeconfig else None
            )
            current = next((c for c in contexts if c.get("name") == context), current)
        return (current or {}).get("context", {}).get("namespace") or "default"
    except Exception:  # no kubeconfig (in-cluster): the API call reports what is wrong
        return "default"


_pod = click.option("--pod", required=True, help="The run's pod (see `crucible ps`).")
_ns = click.option("--namespace", default=None, help="The pod's namespace (default: the context's).")


@click.command("view")
@_pod
@_ns
@click.option("--no-follow", is_flag=True, help="Print what the log holds now and return.")
@_kubeconfig
@_context
def view_command(
    pod: str, namespace: str | None, no_follow: bool, kubeconfig: Path | None, context: str | None
) -> None:
    """Follow a run in a pod: its session events, shown as the console reporter shows a local run."""
    from crucible_deploy_kubernetes import cluster
    from crucible_deploy_kubernetes.remote import iterations_of, render_events

    ns = _namespace(namespace, kubeconfig, context)
    api = cluster.connect(kubeconfig, context)
    target = cluster.read_pod(api, ns, pod)
    if ((target.status.phase if target.status else None) or "Pending") == "Pending":
        # A pending pod has no log yet: wait for its container, reporting phases on stderr.
        cluster.wait_for_start(
            api,
            ns,
            pod,
            timeout=START_TIMEOUT,
            on_phase=lambda p: click.echo(f"pod {ns}/{pod}: {p}", err=True),
        )
    shown = render_events(
        cluster.follow_log(api, ns, pod, follow=not no_follow), sys.stdout, iterations_of(target)
    )
    if shown == 0:
        click.echo(f"crucible: pod {ns}/{pod} has logged no session events yet", err=True)


@click.group("remote")
def remote() -> None:
    """Control a run in a pod: each command runs inside the pod, against the run's control bridge.

    Exit codes: 14 the run refused or is not reachable; 15 the API server is unreachable or
    refused the exec. See docs/kubernetes.md.
    """


def _remote(
    pod: str,
    namespace: str | None,
    kubeconfig: Path | None,
    context: str | None,
    cmd: str,
    fields: dict[str, Any],
    as_json: bool,
) -> None:
    from crucible_deploy_kubernetes import cluster
    from crucible_deploy_kubernetes.remote import control_argv

    ns = _namespace(namespace, kubeconfig, context)
    api = cluster.connect(kubeconfig, context)
    code, out, err = cluster.exec_in_pod(api, ns, pod, control_argv(cmd, fields))
    if code:
        detail = (err or out).strip().splitlines()
        raise ControlError(
            f"`crucible {cmd}` in pod {ns}/{pod} failed (exit {code}): {detail[-1] if detail else 'no output'}",
            hint="is the run still alive? `crucible ps` shows its phase",
        )
    if as_json:
        click.echo(out.strip())
        return
    try:
        reply = json.loads(out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        click.echo(out.strip())
        return
    if cmd == "status":
        click.echo(
            f"phase {reply.get('phase')} at iteration {reply.get('iter')}; best {reply.get('best')} "
            f"(baseline {reply.get('baseline')})"
        )
    else:
        click.echo(
            f"{reply.get('cmd', cmd)}: accepted" + (f"; key {reply['key']}" if reply.get("key") else "")
        )


_json = click.option("--json", "as_json", is_flag=True, help="Print the run's reply as JSON.")


@remote.command("steer")
@_pod
@_ns
@_json
@_kubeconfig
@_context
@click.argument("text")
def remote_steer(
    pod: str, namespace: str | None, as_json: bool, kubeconfig: Path | None, context: str | None, text: str
) -> None:
    """Deliver TEXT into the pod's run's next agent prompt."""
    _remote(pod, namespace, kubeconfig, context, "steer", {"text": text}, as_json)


@remote.command("stop")
@_pod
@_ns
@_json
@_kubeconfig
@_context
@click.option("--reason", default=None, help="Why (recorded in the run's admission ledger).")
def remote_stop(
    pod: str,
    namespace: str | None,
    as_json: bool,
    kubeconfig: Path | None,
    context: str | None,
    reason: str | None,
) -> None:
    """Stop the pod's run at its next iteration head."""
    _remote(pod, namespace, kubeconfig, context, "stop", {"reason": reason}, as_json)


@remote.command("status")
@_pod
@_ns
@_json
@_kubeconfig
@_context
def remote_status(
    pod: str, namespace: str | None, as_json: bool, kubeconfig: Path | None, context: str | None
) -> None:
    """Show where the pod's run stands."""
    _remote(pod, namespace, kubeconfig, context, "status", {}, as_json)
