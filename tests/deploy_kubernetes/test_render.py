"""`crucible deploy render`: stable, valid against the Kubernetes OpenAPI schemas, strict about its inputs."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from crucible_core.errors import ManifestError, UsageError
from crucible_core.manifest.loader import load_manifest
from crucible_deploy_kubernetes import jobs
from crucible_deploy_kubernetes.errors import ClusterError
from crucible_deploy_kubernetes.images import ImageRef, resolve_digest
from crucible_deploy_kubernetes.profile import load_profile
from crucible_deploy_kubernetes.render import RenderOptions, pack_files, render, to_wire, to_yaml
from tests.cli_support import run_crucible
from tests.deploy_kubernetes.conftest import EXAMPLE, write_profile

GOLDEN = Path(__file__).parent / "golden" / "example-loop.yaml"
K8S_VERSION = "1.37.0"


def _validate(doc: dict) -> None:
    kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def _render(options: RenderOptions, profile: Path | None = None, manifest: Path | None = None):
    return render(
        load_manifest(manifest or EXAMPLE / "crucible.toml"),
        load_profile(profile or EXAMPLE / "profile.toml"),
        options,
    )


def test_the_example_renders_as_written_matches_the_golden_file_and_validates() -> None:
    done = run_crucible(
        "deploy",
        "render",
        "--manifest",
        EXAMPLE / "crucible.toml",
        "--profile",
        EXAMPLE / "profile.toml",
        "--no-pin",
        "--iterations",
        "6",
    )
    assert done.returncode == 0, done.stderr
    if os.environ.get("UPDATE_GOLDEN"):
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(done.stdout)
    assert done.stdout == GOLDEN.read_text()
    docs = list(yaml.safe_load_all(done.stdout))
    assert [d["kind"] for d in docs] == [
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "RoleBinding",
        "PersistentVolumeClaim",
        "Pod",
    ]
    for doc in docs:
        _validate(doc)
    pod = docs[-1]
    assert pod["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "crucible"
    assert pod["spec"]["restartPolicy"] == "OnFailure"
    assert pod["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"] == "kubernetes-state"
    container = pod["spec"]["containers"][0]
    assert container["args"] == ["--iterations", "6"]
    assert "--resume" in container["command"][2] and "=== SESSION (rc=" in container["command"][2]
    secret_env = [e for e in container["env"] if "valueFrom" in e and "secretKeyRef" in e["valueFrom"]]
    assert secret_env == [
        {
            "name": "ANTHROPIC_API_KEY",
            "valueFrom": {"secretKeyRef": {"name": "crucible-anthropic", "key": "api-key"}},
        }
    ]
    edit = docs[3]
    assert edit["metadata"]["namespace"] == "counter-rig" and edit["roleRef"]["name"] == "edit"


def test_pack_and_playbook_renders_validate() -> None:
    packed = _render(RenderOptions(pack=True, pack_configmap_name="counter-files"))
    playbook = _render(RenderOptions(playbook=True, max_cost=20, max_time="2h", params=(("issue", "42"),)))
    for obj in (*packed.objects, *playbook.objects):
        _validate(to_wire(obj))
    configmap = next(o for o in packed.objects if o.kind == "ConfigMap")
    assert configmap.metadata.name == "counter-files"
    files = {item.path for item in packed.objects[-1].spec.volumes[1].config_map.items}
    assert {"crucible.toml", "measure.sh", "bump.sh", "value.txt"} <= files
    assert "workspace" not in {f.split("/")[0] for f in files}
    pod = playbook.objects[-1]
    assert pod.spec.restart_policy == "Never"
    assert pod.spec.volumes[0].empty_dir is not None  # a playbook pod keeps no state
    assert pod.spec.containers[0].args == ["--max-cost", "20", "--max-time", "2h", "--param", "issue=42"]
    # the manifest declares the playbook: `crucible run` runs it
    assert "crucible run --manifest" in pod.spec.containers[0].command[2]
    assert not any(o.kind == "PersistentVolumeClaim" for o in playbook.objects)


def test_a_task_job_renders_valid() -> None:
    job = jobs.render_job(
        jobs.TaskSpec(
            name="bench-1",
            namespace="crucible",
            run="counter",
            image="ghcr.io/x/bench:1",
            command=("./bench.sh",),
            env={"N": "3"},
            deadline_seconds=600,
            gpu=1,
            memory="8Gi",
        )
    )
    wire = to_wire(job)
    _validate(wire)
    assert wire["spec"]["backoffLimit"] == 0
    assert wire["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"


def test_render_is_stable() -> None:
    options = RenderOptions(iterations=3, pack=True)
    assert to_yaml(_render(options).objects) == to_yaml(_render(options).objects)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            RenderOptions(playbook=True, max_time="1h"),
            "--playbook needs a positive --max-cost and a --max-time",
        ),
        (RenderOptions(playbook=True, max_cost=5, max_time="1h", harness="claude"), "--harness"),
        (RenderOptions(params=(("a", "b"),)), "--param applies to --playbook only"),
    ],
)
def test_mode_rules(options: RenderOptions, message: str) -> None:
    with pytest.raises(UsageError, match=message.replace("-", r"\-")):
        _render(options)


@pytest.mark.parametrize(
    ("flag", "value"), [("--pr-repo", "o/r"), ("--clusters", "c.toml"), ("--controller", None)]
)
def test_flags_this_version_lacks_are_refused_by_name(flag: str, value: str | None, cli) -> None:
    extra = [flag] if value is None else [flag, value]
    done = cli(
        "deploy",
        "render",
        "-m",
        EXAMPLE / "crucible.toml",
        "-p",
        EXAMPLE / "profile.toml",
        "--no-pin",
        *extra,
    )
    assert done.returncode == 64
    assert f"{flag} is not supported by this version" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_profile_is_strict_and_names_every_key_path(tmp_path: Path) -> None:
    text = (EXAMPLE / "profile.toml").read_text()
    text = text.replace("[state]\n", '[state]\ncolour = "blue"\n').replace(
        'cpu_limit = "2"', 'cpu_limit = "two"'
    )
    profile = write_profile(tmp_path, text)
    with pytest.raises(ManifestError) as raised:
        load_profile(profile)
    assert "unknown key 'colour' in [state]" in raised.value.message
    text = (EXAMPLE / "profile.toml").read_text().replace('cpu_limit = "2"', 'cpu_limit = "two"')
    text = text.replace('secret = "crucible-anthropic"', 'secret = ""')
    with pytest.raises(ManifestError) as raised:
        load_profile(write_profile(tmp_path, text))
    assert "[resources].cpu_limit = 'two'" in raised.value.message
    assert "[[secret_env]][0].secret is empty" in raised.value.message


def test_render_finds_crucible_toml_like_every_other_command(cli, monkeypatch: pytest.MonkeyPatch) -> None:
    named = cli(
        "deploy", "render", "-m", EXAMPLE / "crucible.toml", "-p", EXAMPLE / "profile.toml", "--no-pin"
    )
    assert named.returncode == 0, named.stderr
    monkeypatch.chdir(EXAMPLE)
    found = cli("deploy", "render", "-p", "profile.toml", "--no-pin")
    assert found.returncode == 0, found.stderr
    assert found.stdout == named.stdout


def test_a_missing_credential_secret_is_one_line_at_render_time(tmp_path: Path, cli) -> None:
    manifest_dir = tmp_path / "claude-run"
    manifest_dir.mkdir()
    (manifest_dir / "measure.sh").write_text('#!/bin/sh\necho \'{"valid": true, "score": 1}\'\n')
    (manifest_dir / "crucible.toml").write_text(
        '[repo]\npath = "."\n[agent]\nharness = "claude"\ngoal = "g"\n[judge]\nmeasure_cmd = "./measure.sh"\ndirection = "higher"\n'
    )
    text = (EXAMPLE / "profile.toml").read_text().split("[[secret_env]]")[0]
    profile = write_profile(tmp_path, text)
    done = cli("deploy", "render", "-m", manifest_dir / "crucible.toml", "-p", profile, "--no-pin")
    assert done.returncode == 10, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "needs one of ANTHROPIC_API_KEY" in lines[0] and "[[secret_env]]" in lines[0]


@pytest.mark.parametrize(
    ("reference", "registry", "repository", "tag", "api_base"),
    [
        ("ubuntu:24.04", "docker.io", "library/ubuntu", "24.04", "https://registry-1.docker.io"),
        ("ghcr.io/org/crucible", "ghcr.io", "org/crucible", None, "https://ghcr.io"),
        ("localhost:5000/team/img:1", "localhost:5000", "team/img", "1", "http://localhost:5000"),
        ("127.0.0.1:5000/img:v2", "127.0.0.1:5000", "img", "v2", "http://127.0.0.1:5000"),
    ],
)
def test_image_references_parse_to_their_registry(
    reference: str, registry: str, repository: str, tag: str | None, api_base: str
) -> None:
    ref = ImageRef.parse(reference)
    assert (ref.registry, ref.repository, ref.tag, ref.api_base) == (registry, repository, tag, api_base)
    digest = "sha256:" + "a" * 64
    assert ImageRef.parse(ref.pinned(digest)).digest == digest
    assert resolve_digest(ref.pinned(digest)) == ref.pinned(digest)  # already pinned: no lookup


def test_image_tags_pin_to_the_registry_digest(registry, tmp_path: Path, cli) -> None:
    digest = registry.push("team/crucible", "0.1")
    pinned = resolve_digest(f"{registry.host}/team/crucible:0.1")
    assert pinned == f"{registry.host}/team/crucible:0.1@{digest}"
    assert any(auth == "Bearer anon" for _, _, auth in registry.requests)  # the token dance happened
    profile = write_profile(tmp_path, image=f"{registry.host}/team/crucible:0.1")
    done = cli("deploy", "render", "-m", EXAMPLE / "crucible.toml", "-p", profile)
    assert done.returncode == 0, done.stderr
    pod = list(yaml.safe_load_all(done.stdout))[-1]
    assert pod["spec"]["containers"][0]["image"] == pinned
    assert pod["metadata"]["annotations"]["crucible.dev/image-tag"] == f"{registry.host}/team/crucible:0.1"


def test_an_unknown_tag_or_unreachable_registry_is_one_line_with_the_way_out(
    registry, tmp_path: Path, cli
) -> None:
    with pytest.raises(ClusterError, match="answered 404"):
        resolve_digest(f"{registry.host}/team/crucible:nope")
    profile = write_profile(tmp_path, image="127.0.0.1:9/team/crucible:0.1")  # discard port: refused
    done = cli("deploy", "render", "-m", EXAMPLE / "crucible.toml", "-p", profile)
    assert done.returncode == 15
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "registry unreachable" in lines[0] and "--no-pin" in lines[0]


@pytest.mark.leaves_open_log("it plants a stand-in state/session.jsonl that a pack must leave out")
def test_a_pack_carries_plain_domain_files_only(tmp_path: Path) -> None:
    for rel in ("crucible.toml", "tools/measure.sh", "state/session.jsonl", "workspace/a.py", ".git/HEAD"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(rel)
    (tmp_path / "outside").symlink_to("/etc/hostname")
    assert [rel for rel, _ in pack_files(tmp_path, "workspace")] == ["crucible.toml", "tools/measure.sh"]
    # A manifest whose workspace is its own directory: nothing to leave out but state and VCS data.
    assert [rel for rel, _ in pack_files(tmp_path, ".")] == [
        "crucible.toml",
        "tools/measure.sh",
        "workspace/a.py",
    ]


def _manifest_naming_a_profile(tmp_path: Path, profile_text: str) -> Path:
    """The example domain with a [deploy] section naming `cluster/profile.toml` beside it."""
    domain = tmp_path / "counter"
    shutil.copytree(EXAMPLE, domain)
    manifest = domain / "crucible.toml"
    manifest.write_text(manifest.read_text() + '\n[deploy]\nprofile = "cluster/profile.toml"\n')
    (domain / "cluster").mkdir()
    (domain / "cluster" / "profile.toml").write_text(profile_text)
    return manifest


def _job_rights(objects) -> list[tuple[str, str, set[str]]]:
    """(namespace, resource, verbs) of every Role rule over what the Job runner touches."""
    return [
        (o.metadata.namespace, resource, set(rule.verbs))
        for o in objects
        if o.kind == "Role"
        for rule in o.rules
        for resource in rule.resources
        if resource in ("jobs", "configmaps")
    ]


def test_a_loop_whose_deploy_profile_runs_tasks_may_run_jobs_in_the_tasks_namespace(tmp_path: Path) -> None:
    # The tasks run in another namespace than the loop pod: the rights are granted there, to the
    # loop pod's service account.
    text = (EXAMPLE / "profile.toml").read_text().replace('namespace = "crucible"', 'namespace = "gpu-jobs"')
    manifest = _manifest_naming_a_profile(tmp_path, text)
    for options in (RenderOptions(), RenderOptions(playbook=True, max_cost=5, max_time="1h", pack=True)):
        rendered = _render(options, manifest=manifest)
        for obj in rendered.objects:
            _validate(to_wire(obj))
        role = next(
            o for o in rendered.objects if o.kind == "Role" and o.metadata.name == "counter-crucible-tasks"
        )
        binding = next(
            o
            for o in rendered.objects
            if o.kind == "RoleBinding" and o.metadata.name == "counter-crucible-tasks"
        )
        assert role.metadata.namespace == binding.metadata.namespace == "gpu-jobs"
        assert [(r.api_groups, r.resources, sorted(r.verbs)) for r in role.rules] == [
            (["batch"], ["jobs"], ["create", "delete", "get", "list", "watch"]),
            ([""], ["configmaps"], ["create", "delete", "get", "list", "watch"]),
            ([""], ["pods", "pods/log"], ["get", "list"]),
        ]
        assert binding.role_ref.name == "counter-crucible-tasks" and binding.role_ref.kind == "Role"
        [subject] = binding.subjects
        assert (subject.kind, subject.name, subject.namespace) == (
            "ServiceAccount",
            "crucible-loop",
            "crucible",
        )
        # Nowhere else: the loop's own namespace grants reading pods only.
        assert {ns for ns, _, _ in _job_rights(rendered.objects)} == {"gpu-jobs"}
    # The GPU-judge example measures as Jobs: its loop pod may run them, in its own namespace.
    judged = _render(RenderOptions(), manifest=EXAMPLE / "gpu-judge" / "crucible.toml")
    for obj in judged.objects:
        _validate(to_wire(obj))
    assert {ns for ns, _, _ in _job_rights(judged.objects)} == {"crucible"}


def test_a_loop_that_runs_no_task_jobs_gets_no_rights_over_jobs(tmp_path: Path) -> None:
    # No [deploy] at all (the example), and a [deploy] profile without [tasks].
    without_tasks = (EXAMPLE / "profile.toml").read_text().split("# Plan tasks that need")[0]
    assert "[tasks]" not in without_tasks
    named = _manifest_naming_a_profile(tmp_path, without_tasks)
    for manifest, options in (
        (EXAMPLE / "crucible.toml", RenderOptions()),
        (EXAMPLE / "crucible.toml", RenderOptions(playbook=True, max_cost=5, max_time="1h")),
        (named, RenderOptions()),  # a playbook naming it is refused: see the next test
    ):
        rendered = _render(options, manifest=manifest)
        assert _job_rights(rendered.objects) == []
        assert not any(o.metadata.name.endswith("-tasks") for o in rendered.objects)
        [role] = [o for o in rendered.objects if o.kind == "Role"]
        assert [(r.resources, r.verbs) for r in role.rules] == [
            (["pods", "pods/log"], ["get", "list", "watch"])
        ]


def test_a_loop_whose_judge_needs_a_runner_refuses_a_profile_without_tasks(tmp_path: Path) -> None:
    without_tasks = (EXAMPLE / "profile.toml").read_text().split("# Plan tasks that need")[0]
    manifest = _manifest_naming_a_profile(tmp_path, without_tasks)
    manifest.write_text(
        manifest.read_text().replace('objective = "value"', 'objective = "value"\nneeds = "gpu"')
    )
    argv = ("deploy", "render", "--manifest", manifest, "--profile", EXAMPLE / "profile.toml", "--no-pin")
    done = run_crucible(*argv)
    assert done.returncode == 10, done.stdout + done.stderr
    assert "no [tasks] section: the loop pod's run would refuse it at start" in done.stderr
    (manifest.parent / "cluster" / "profile.toml").write_text((EXAMPLE / "profile.toml").read_text())
    assert run_crucible(*argv).returncode == 0


def test_a_playbook_naming_a_profile_without_tasks_is_refused_at_render_time(tmp_path: Path) -> None:
    # Its pod's `plan run` would refuse that profile before running anything: say so now.
    without_tasks = (EXAMPLE / "profile.toml").read_text().split("# Plan tasks that need")[0]
    manifest = _manifest_naming_a_profile(tmp_path, without_tasks)
    done = run_crucible(
        "deploy",
        "render",
        "--playbook",
        "--manifest",
        manifest,
        "--profile",
        EXAMPLE / "profile.toml",
        "--no-pin",
        "--max-cost",
        "5",
        "--max-time",
        "1h",
    )
    assert done.returncode == 10, done.stdout + done.stderr
    assert str(manifest.parent / "cluster" / "profile.toml") in done.stderr
    assert "no [tasks] section" in done.stderr and done.stdout == ""
    # The same profile with [tasks] renders.
    (manifest.parent / "cluster" / "profile.toml").write_text((EXAMPLE / "profile.toml").read_text())
    assert (
        run_crucible(
            "deploy",
            "render",
            "--playbook",
            "--manifest",
            manifest,
            "--profile",
            EXAMPLE / "profile.toml",
            "--no-pin",
            "--max-cost",
            "5",
            "--max-time",
            "1h",
        ).returncode
        == 0
    )


@pytest.mark.parametrize(
    "flag",
    [("--max-cost", "nan"), ("--max-cost", "inf"), ("--max-cost", "1e308"), ("--iterations", "10000000000")],
)
def test_render_bounds_budget_flags_as_the_pods_run_does(flag: tuple[str, str]) -> None:
    """A NaN or unbounded cap is refused at render, not by the pod's `crucible run` after it starts."""
    done = run_crucible(
        "deploy", "render", "--manifest", EXAMPLE / "crucible.toml", "--profile", EXAMPLE / "profile.toml",
        "--no-pin", *flag,
    )  # fmt: skip
    assert done.returncode == 64, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""


def test_a_pack_whose_pod_would_have_no_repository_to_clone_is_refused_at_render(tmp_path: Path) -> None:
    domain = tmp_path / "domain"
    shutil.copytree(EXAMPLE, domain)
    manifest = domain / "crucible.toml"
    text = manifest.read_text()
    manifest.write_text(
        text.replace('setup_cmd = "mkdir -p workspace && cp value.txt bump.sh workspace/"\n', "")
    )
    with pytest.raises(ManifestError, match=r"without its git data.*\[repo\] path"):
        _render(RenderOptions(pack=True), manifest=manifest)
    _render(RenderOptions(), manifest=manifest)  # baked into the image, the repository may be there


def test_a_loop_whose_tasks_share_a_claim_mounts_it_where_the_profile_says(tmp_path: Path) -> None:
    text = (
        (EXAMPLE / "profile.toml")
        .read_text()
        .replace("[tasks]\n", '[tasks]\nclaim = "crucible-share"\nclaim_mount = "/mnt/share"\n', 1)
    )
    manifest = _manifest_naming_a_profile(tmp_path, text)
    for options in (RenderOptions(), RenderOptions(playbook=True, max_cost=5, max_time="1h", pack=True)):
        rendered = _render(options, manifest=manifest)
        for obj in rendered.objects:
            _validate(to_wire(obj))
        [pod] = [o for o in rendered.objects if o.kind == "Pod"]
        [share] = [v for v in pod.spec.volumes if v.name == "share"]
        assert share.persistent_volume_claim.claim_name == "crucible-share"
        mounts = {m.name: m.mount_path for m in pod.spec.containers[0].volume_mounts}
        assert mounts["share"] == "/mnt/share"
    # A claim is namespaced: a pod in another namespace than the tasks' could not mount it.
    elsewhere = _manifest_naming_a_profile(
        tmp_path / "other", text.replace('namespace = "crucible"', 'namespace = "gpu-jobs"')
    )
    with pytest.raises(ManifestError, match="lives in the tasks' namespace 'gpu-jobs'"):
        _render(RenderOptions(), manifest=elsewhere)
