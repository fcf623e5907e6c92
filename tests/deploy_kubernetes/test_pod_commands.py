"""What a rendered pod runs is a command the real CLI accepts, and the playbook pod runs to completion.

Every `crucible` command line a rendered object would execute (the loop pod's, the playbook
pod's, and the in-pod control commands `crucible remote steer|stop|status` execs) is resolved by running the
pod's own script under /bin/sh with a stand-in `crucible` that records its argv, then parsed
with the real CLI's click parser, so the renderer and the CLI cannot drift apart. (Task Jobs run
the task's own command, never `crucible`.) Then the playbook pod `deploy apply --playbook`
writes runs on the fake cluster's kubelet, with the real `crucible`, to a valid verdict.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import click
import pytest

from crucible_core.cli.main import cli
from crucible_core.manifest.loader import load_manifest
from crucible_deploy_kubernetes.profile import load_profile
from crucible_deploy_kubernetes.remote import control_argv
from crucible_deploy_kubernetes.render import RenderOptions, render
from tests.cli_support import EXAMPLES
from tests.deploy_kubernetes.conftest import EXAMPLE, write_profile
from tests.deploy_kubernetes.fake_apiserver import FakeApiServer
from tests.deploy_kubernetes.fake_kubelet import FakeKubelet

PLAYBOOK = EXAMPLES / "playbook"
RECORDER = """#!{python}
import json, os, sys
with open(os.environ["ARGV_LOG"], "a") as log:
    log.write(json.dumps(sys.argv[1:]) + "\\n")
"""


def parse(argv: list[str]) -> click.Context:
    """The innermost context the real CLI makes of argv (every option parsed, every check run)."""
    ctx = cli.make_context("crucible", list(argv))
    command: click.Command = cli
    while isinstance(command, click.Group):
        name, sub, rest = command.resolve_command(ctx, [*ctx._protected_args, *ctx.args])
        assert sub is not None and name is not None
        command, ctx = sub, sub.make_context(name, rest, parent=ctx)
    return ctx


def pod_argvs(pod, tmp_path: Path, source: Path) -> list[list[str]]:
    """The argv of every `crucible` the pod's container script runs, with the pod's own args."""
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    (bindir / "crucible").write_text(RECORDER.format(python=sys.executable))
    (bindir / "crucible").chmod(0o755)
    log = tmp_path / "argv.jsonl"
    log.unlink(missing_ok=True)
    [container] = pod.spec.containers
    env = {e.name: e.value for e in container.env if e.value is not None}
    env.update(
        CRUCIBLE_SOURCE_DIR=str(source),
        CRUCIBLE_RUN_DIR=str(tmp_path / "run"),
        ARGV_LOG=str(log),
        PATH=f"{bindir}{os.pathsep}{os.environ['PATH']}",
    )
    done = subprocess.run([*container.command, *container.args], env=env, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in log.read_text().splitlines()]


@pytest.mark.parametrize(
    ("domain", "options", "command"),
    [
        (EXAMPLE, RenderOptions(iterations=3, max_cost=2, max_time="1h", harness="claude"), "run"),
        (PLAYBOOK, RenderOptions(playbook=True, max_cost=0.5, max_time="5m", params=(("a", "b"),)), "run"),
    ],
    ids=["loop", "playbook"],
)
def test_every_command_a_rendered_pod_runs_parses_with_the_real_cli(
    domain: Path, options: RenderOptions, command: str, tmp_path: Path
) -> None:
    source = tmp_path / "image-domain"
    shutil.copytree(domain, source)
    profile = write_profile(tmp_path)
    rendered = render(load_manifest(source / "crucible.toml"), load_profile(profile), options)
    argvs = pod_argvs(rendered.objects[-1], tmp_path, source)
    assert [argv[0] for argv in argvs] == [command]
    ctx = parse(argvs[0])  # a usage error here is the pod dying with exit 64
    assert ctx.params["manifest"] == tmp_path / "run" / "crucible.toml"
    assert ctx.params["max_cost"] == options.max_cost
    if options.playbook:
        assert ctx.params["params"] == ("a=b",)
    else:
        assert (ctx.params["iterations"], ctx.params["harness"]) == (3, "claude")


@pytest.mark.parametrize(
    ("cmd", "fields"),
    [
        ("steer", {"text": "try the cache", "id": None}),
        ("stop", {"reason": "done here"}),
        ("status", {}),
    ],
)
def test_the_in_pod_control_commands_parse_with_the_real_cli(cmd: str, fields: dict) -> None:
    argv = control_argv(cmd, fields)
    assert argv[0] == "crucible"
    ctx = parse(argv[1:])
    assert ctx.params["as_json"] is True and ctx.params["state_dir"] == Path(argv[3])


def test_the_playbook_pod_runs_to_completion_on_the_cluster(
    fake_api: FakeApiServer, kubeconfig: Path, cli, tmp_path: Path
) -> None:
    domain = tmp_path / "playbook"
    shutil.copytree(PLAYBOOK, domain)
    kubelet = FakeKubelet(fake_api, tmp_path / "node")
    kubelet.run_pods = True
    kubelet.path_prefix = Path(sys.executable).parent  # the image's `crucible`
    applied = cli(
        "deploy",
        "apply",
        "-m",
        domain / "crucible.toml",
        "-p",
        write_profile(tmp_path),
        "--playbook",
        "--pack",
        "--max-cost",
        "0.5",
        "--max-time",
        "5m",
        "--no-pin",
        "--kubeconfig",
        kubeconfig,
        "--no-wait",
    )
    assert applied.returncode == 0, applied.stderr
    for thread in kubelet.threads:
        thread.join(timeout=120)
    [pod_name] = kubelet.pod_output
    output = kubelet.pod_output[pod_name]
    pod = fake_api.get("pods", "crucible", pod_name)
    assert pod is not None and pod["status"]["phase"] == "Succeeded", output
    log = output.split("=== SESSION (rc=0) ===\n", 1)[1]
    events = [json.loads(line) for line in log.splitlines()]
    assert events[-1]["kind"] == "shutdown" and events[-1]["outcome"] == "finished"
    assert [e["kind"] for e in events].count("task_result") >= 1
    assert all(e["status"] == "pass" for e in events if e["kind"] == "task_result")
