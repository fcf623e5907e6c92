"""Workspaces of any size on a shared claim: the Kubernetes task runner writes each attempt's
workspace as git objects to a ReadWriteMany volume ([tasks].claim), the Job's pod checks the
exact tree out and verifies its id, and a proposal's edits come back as a tree on the volume.

The fake API server speaks the real wire to the real kubernetes client; the fake kubelet runs
each pod's script for real under /bin/sh with real git, the claim standing for a directory this
machine shares with the "pods". The large test moves a 200 MiB, 20,000-file repository through
a measure-shaped Job and a wide-proposal-shaped Job (the two shapes the engine hands the runner:
a command judged on the live workdir, and a command with a prompt whose workdir comes back)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import threading
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

from crucible_core.api import Attempt, Outcome, ShellStdin, Task, TaskContext, TaskKindSpec, wire
from crucible_deploy_kubernetes import cluster, shared_tree
from crucible_deploy_kubernetes.profile import load_profile
from crucible_deploy_kubernetes.shared_tree import ObjectStore, ReturnRefused
from crucible_deploy_kubernetes.task_runner import KubernetesTaskRunner
from tests.deploy_kubernetes.conftest import task_profile
from tests.deploy_kubernetes.fake_apiserver import FakeApiServer
from tests.deploy_kubernetes.fake_kubelet import FakeKubelet
from tests.deploy_kubernetes.test_render import _validate

NS = "crucible"
CLAIM = "crucible-share"
FILES, DIRS, FILE_BYTES = 20_000, 200, 10_486  # 200 MiB in all


@attrs.frozen
class _Fields:
    """No fields of its own: the test kinds carry their command in the context."""


def _measure_kind(command: str) -> TaskKindSpec:
    """A measure's shape: one command on the workspace as it stands, judged by its stdout."""

    def run(context: TaskContext) -> Attempt:
        assert context.shell is not None
        done = context.shell(command, {}, 120.0)
        if done.spawn_error is not None:
            return Attempt(Outcome.TRANSPORT, note=done.spawn_error, transport="other")
        return Attempt(Outcome.PASS if done.ok else Outcome.FAIL, output={"stdout": done.stdout})

    return TaskKindSpec("big_measure", _Fields, run, remote=True, live_workdir=True)


def _propose_kind(command: str) -> TaskKindSpec:
    """A wide proposal's shape: a command with a prompt on stdin, whose workdir comes back."""

    def run(context: TaskContext) -> Attempt:
        assert context.shell is not None
        stdin = ShellStdin(b"Lower the cost.\n", file_env="CRUCIBLE_PROMPT_FILE")
        done = context.shell(
            command, {"CRUCIBLE_WORKSPACE": str(context.workdir)}, 120.0, stdin=stdin, returns_workspace=True
        )
        if done.spawn_error is not None:
            return Attempt(Outcome.TRANSPORT, note=done.spawn_error, transport="other")
        return Attempt(Outcome.PASS if done.ok else Outcome.FAIL, note=done.stderr[-300:])

    return TaskKindSpec("big_propose", _Fields, run, remote=True, returns_workspace=True)


def _context(task: str, workdir: Path) -> TaskContext:
    return TaskContext(
        task=Task(name=task, kind=task, fields=_Fields(), needs="gpu"),
        workdir=workdir,
        env={},
        inputs={},
        timeout=120.0,
    )


def _bytes_under(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file() and not p.is_symlink())


@pytest.fixture(scope="module")
def big_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """200 MiB of incompressible content in 20,000 files (200 directories of 100), made once."""
    root = tmp_path_factory.mktemp("big") / "repo"
    per_dir = FILES // DIRS
    for d in range(DIRS):
        directory = root / f"pkg{d:03d}"
        directory.mkdir(parents=True)
        view = memoryview(os.urandom(per_dir * FILE_BYTES))  # one random draw per directory
        for f in range(per_dir):
            with open(directory / f"m{f:03d}.bin", "wb") as out:
                out.write(view[f * FILE_BYTES : (f + 1) * FILE_BYTES])
    return root


@pytest.fixture
def node(fake_api: FakeApiServer, tmp_path: Path) -> Iterator[dict[str, Any]]:
    claim = tmp_path / "claim"
    claim.mkdir()
    profile = tmp_path / "profile.toml"
    profile.write_text(task_profile(f'log_lines = 20\nclaim = "{CLAIM}"\nclaim_mount = "{claim}"\n'))
    kubelet = FakeKubelet(fake_api, tmp_path / "node")
    kubelet.claims[CLAIM] = claim
    kubelet.timeout = 600.0
    notes: list[str] = []

    def emit(event: wire.Event) -> None:
        if isinstance(event, wire.Note):
            notes.append(event.msg)

    api = cluster.connect(tmp_path / "kubeconfig", None)
    runner = KubernetesTaskRunner(load_profile(profile), api, run="big-run", emit=emit)
    yield {"runner": runner, "claim": claim, "notes": notes, "kubelet": kubelet, "dir": tmp_path}
    runner.close()
    for thread in kubelet.threads:
        thread.join(timeout=10)


def _written(notes: list[str]) -> int:
    """The bytes the last attempt wrote to the claim, as its note says."""
    found = [re.search(r"as tree [0-9a-f]{40} \((\d+) files, (\d+) bytes written\)", n) for n in notes]
    hits = [m for m in found if m is not None]
    return int(hits[-1].group(2))


@pytest.mark.slow
@pytest.mark.timeout(900)  # about 25 s of CPU; minutes of wall time on a loaded machine
def test_a_200_mib_repository_moves_through_a_measure_job_and_a_proposal_job_writing_only_the_change(
    fake_api: FakeApiServer, node: dict[str, Any], big_repo: Path, tmp_path: Path
) -> None:
    started = time.monotonic()
    runner: KubernetesTaskRunner = node["runner"]
    claim: Path = node["claim"]
    workspace = tmp_path / "workspace"
    os.rename(big_repo, workspace)  # the module's repository, lent to this test and given back
    try:
        # The measure: the pod lays out the tree, verifies its id, and counts what it got.
        count = 'echo "{\\"valid\\": true, \\"score\\": $(find . -type f | wc -l)}"'
        measured = runner.run(_context("measure", workspace), _measure_kind(count))
        assert measured.outcome is Outcome.PASS, (measured, node["notes"])
        assert json.loads(measured.output["stdout"].strip().splitlines()[-1])["score"] == FILES
        first = _written(node["notes"])
        assert first > FILES * FILE_BYTES  # the first attempt writes the whole repository once
        assert not list((claim / "crucible" / "big-run" / "attempts").iterdir())  # attempt cleaned up
        stored = _bytes_under(claim)

        # One file changed, then a proposal: this attempt writes of the order of that change.
        (workspace / "pkg042" / "m007.bin").write_bytes(os.urandom(FILE_BYTES))
        propose = (
            'grep -q "Lower the cost" "$CRUCIBLE_PROMPT_FILE" && grep -q "Lower the cost" - && '
            '[ "$CRUCIBLE_WORKSPACE" = "$(pwd)" ] && '
            "printf 'new\\n' >> pkg001/m000.bin && echo added > pkg199/notes.txt && rm pkg100/m050.bin"
        )
        proposed = runner.run(_context("propose-1", workspace), _propose_kind(propose))
        assert proposed.outcome is Outcome.PASS, (proposed, node["notes"])
        second = _written(node["notes"])
        # the changed blob, its directory's tree, the root tree and the prompt: never the repository
        assert FILE_BYTES < second < 64 * 1024, second
        assert _bytes_under(claim) - stored < 64 * 1024  # the returned objects went with the attempt
        assert not list((claim / "crucible" / "big-run" / "attempts").iterdir())
        assert (workspace / "pkg001" / "m000.bin").read_bytes().endswith(b"new\n")
        assert (workspace / "pkg199" / "notes.txt").read_text() == "added\n"
        assert not (workspace / "pkg100" / "m050.bin").exists()
        assert any("its workspace came back (2 file(s), 1 deleted)" in n for n in node["notes"])

        jobs = [
            json.loads(c["body"]) for c in fake_api.calls_to("POST", f"/apis/batch/v1/namespaces/{NS}/jobs")
        ]
        assert len(jobs) == 2 and not fake_api.calls_to("POST", "/configmaps")  # no pack at all
        for job in jobs:
            _validate(job)
            pod = job["spec"]["template"]["spec"]
            assert pod["volumes"] == [{"name": "share", "persistentVolumeClaim": {"claimName": CLAIM}}]
            mounts = {m["mountPath"]: m for m in pod["containers"][0]["volumeMounts"]}
            assert mounts["/opt/crucible/share/objects"]["readOnly"] is True
            assert mounts["/opt/crucible/share/objects"]["subPath"] == "crucible/big-run/objects"
            assert mounts["/opt/crucible/share/attempt"]["subPath"].startswith("crucible/big-run/attempts/")
    finally:
        os.rename(workspace, big_repo)
    print(
        f"\n200 MiB through a measure Job and a proposal Job: {time.monotonic() - started:.1f}s, wrote {first} then {second} bytes"
    )


def _small_node(node: dict[str, Any]) -> Path:
    workspace = node["dir"] / "small"
    (workspace / "src").mkdir(parents=True)
    (workspace / "src" / "a.txt").write_text("a\n")
    (workspace / "run.sh").write_text("echo run\n")
    (workspace / "run.sh").chmod(0o755)
    return workspace


def test_a_workspace_on_the_claim_leaves_out_links_fifos_and_state_as_the_pack_does(
    node: dict[str, Any],
) -> None:
    workspace = _small_node(node)
    os.symlink("/etc/passwd", workspace / "outside")
    os.mkfifo(workspace / "pipe")
    (workspace / "state").mkdir()
    (workspace / "state" / "secret.txt").write_text("stays here\n")
    (workspace / ".git").write_text("gitdir: /somewhere/else\n")
    listing = "find . \\( -type f -o -type l -o -type p \\) | sort | tr '\\n' ' '"
    done = node["runner"].run(_context("measure", workspace), _measure_kind(listing))
    assert done.outcome is Outcome.PASS, (done, node["notes"])
    assert done.output["stdout"].split() == ["./run.sh", "./src/a.txt"]


def test_a_pod_that_lays_out_another_tree_refuses_to_run(node: dict[str, Any]) -> None:
    """The pod re-hashes what it checked out: a store object changed under it is caught."""
    workspace = _small_node(node)
    store: ObjectStore = node["runner"].store
    shipped = store.ship(workspace)
    blob = shared_tree.object_id(b"blob", b"a\n")
    path = store.objects / blob[:2] / blob[2:]
    path.chmod(0o644)
    path.write_bytes(zlib.compress(b"blob 2\0b\n"))  # what a corrupted volume would hold
    store._hashed.clear()
    done = node["runner"].run(_context("measure", workspace), _measure_kind("echo ran"))
    assert done.outcome is Outcome.TRANSPORT  # a workspace that cannot be laid out is the cluster's failure
    assert "could not lay out the task's workspace" in done.note
    log = "\n".join(node["kubelet"].api.logs.values())
    assert f"not the candidate's {shipped.tree}" in log


@pytest.mark.parametrize(
    ("command", "why"),
    [
        ("ln -s /etc/passwd src/leak", "'src/leak', a link"),
        (
            "mkdir sub && git -C sub init -q && echo x > sub/f && git -C sub add f && "
            "git -C sub -c user.name=a -c user.email=a@example.com commit -qm x",
            "a submodule",
        ),
    ],
)
def test_a_returned_tree_with_a_link_or_a_submodule_is_refused_and_nothing_is_written(
    node: dict[str, Any], command: str, why: str
) -> None:
    workspace = _small_node(node)
    before = {p: p.read_bytes() for p in workspace.rglob("*") if p.is_file()}
    done = node["runner"].run(
        _context("propose-1", workspace), _propose_kind(f"echo changed > src/a.txt && {command}")
    )
    assert done.outcome is Outcome.FAIL
    assert any("the workspace it left was refused" in n and why in n for n in node["notes"]), node["notes"]
    assert {p: p.read_bytes() for p in workspace.rglob("*") if p.is_file()} == before
    assert not (workspace / "src" / "leak").exists() and not (workspace / "sub").exists()


def _loose(directory: Path, kind: bytes, body: bytes, oid: str | None = None) -> str:
    oid = oid or shared_tree.object_id(kind, body)
    path = directory / oid[:2] / oid[2:]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(zlib.compress(b"%s %d\0" % (kind, len(body)) + body))
    return oid


def _tree(entries: list[tuple[bytes, bytes, str]]) -> bytes:
    return b"".join(b"%s %s\0" % (mode, name) + bytes.fromhex(oid) for mode, name, oid in entries)


@pytest.mark.parametrize(
    ("entries", "why"),
    [
        ([(b"100644", b"..", "blob")], "not a plain name"),
        ([(b"100644", b".GIT", "blob")], "not a plain name"),
        ([(b"100644", b"a.txt", "forged")], "does not hold what its id says"),
        ([(b"100644", b"a.txt", "missing")], "is not in the attempt's objects"),
        ([(b"100644", b"huge.bin", "huge")], "over 1000 bytes"),
        ([(b"100644", b"x", "blob"), (b"100644", b"x", "blob")], "twice"),
    ],
)
def test_a_hostile_returned_tree_is_refused_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, entries: list[tuple[bytes, bytes, str]], why: str
) -> None:
    monkeypatch.setattr(shared_tree, "MAX_UNPACKED_BYTES", 1000)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "keep.txt").write_text("keep\n")
    store = ObjectStore(tmp_path / "claim", "run")
    shipped = store.ship(workspace).tree
    extra = store.attempt_dir("job") / "objects"
    ids = {
        "blob": _loose(extra, b"blob", b"fine\n"),
        "forged": _loose(extra, b"blob", b"other\n", oid="ab" * 20),
        "missing": "cd" * 20,
        "huge": _loose(extra, b"blob", b"h" * 2000),
    }
    returned = _loose(extra, b"tree", _tree([(mode, name, ids[key]) for mode, name, key in entries]))
    with pytest.raises(ReturnRefused, match=re.escape(why)):
        store.bring_back(workspace, shipped, returned, extra)
    assert sorted(p.name for p in workspace.iterdir()) == ["keep.txt"]


def test_cancelling_the_run_removes_the_attempts_on_the_claim(node: dict[str, Any]) -> None:
    workspace = _small_node(node)
    node["kubelet"].script = ["hang"]
    runner: KubernetesTaskRunner = node["runner"]
    result: list[Attempt] = []
    thread = threading.Thread(
        target=lambda: result.append(runner.run(_context("measure", workspace), _measure_kind("sleep 60"))),
        daemon=True,
    )
    thread.start()
    attempts = node["claim"] / "crucible" / "big-run" / "attempts"
    for _ in range(300):  # until the attempt's directory is there and its pod runs (bounded: 30 s)
        pods = [k for k in node["kubelet"].api.objects if k[0] == "pods"]
        if attempts.is_dir() and list(attempts.iterdir()) and pods:
            break
        time.sleep(0.1)
    runner.cancel()
    thread.join(timeout=30)
    assert result and result[0].outcome is Outcome.TRANSPORT
    assert not attempts.exists()
    assert (node["claim"] / "crucible" / "big-run" / "objects").is_dir()  # the run's store stays


def test_a_claim_is_checked_like_every_name_and_needs_the_pack_workspace(tmp_path: Path) -> None:
    from crucible_core.errors import ManifestError

    path = tmp_path / "profile.toml"
    path.write_text(task_profile('claim = "Not_A_Name"\nworkspace = "image"\nclaim_mount = "rel"\n'))
    with pytest.raises(ManifestError) as caught:
        load_profile(path)
    text = str(caught.value)
    assert "[tasks].claim = 'Not_A_Name' is not a valid Kubernetes name" in text
    assert '[tasks].workspace = "image" never ships' in text
    assert "[tasks].claim_mount must be an absolute path" in text


def test_without_a_claim_a_large_workspace_is_refused_naming_the_claim(
    node: dict[str, Any], tmp_path: Path
) -> None:
    from crucible_deploy_kubernetes.render import CONFIGMAP_MAX_BYTES
    from crucible_deploy_kubernetes.task_runner import pack_workspace

    (tmp_path / "big.bin").write_bytes(b"x" * (CONFIGMAP_MAX_BYTES + 1))
    with pytest.raises(ValueError, match=r"name a ReadWriteMany claim in \[tasks\].claim"):
        pack_workspace(tmp_path)


def test_the_store_writes_what_git_reads(tmp_path: Path) -> None:
    """The trees written here are git's: git checks them out and hashes the same ids."""
    workspace = tmp_path / "ws"
    for name in ("a", "a-b", "a.b", "b/c/d.txt", "run.sh"):
        (workspace / name).parent.mkdir(parents=True, exist_ok=True)
        if name == "a":
            (workspace / "a").mkdir(exist_ok=True)
            (workspace / "a" / "z").write_text("z\n")
        else:
            (workspace / name).write_text(f"{name}\n")
    (workspace / "run.sh").chmod(0o755)
    store = ObjectStore(tmp_path / "claim", "run")
    tree = store.ship(workspace).tree
    env = {**os.environ, "GIT_DIR": str(workspace / ".git")}
    subprocess.run(["git", "init", "-q"], cwd=workspace, check=True, env=env)
    subprocess.run(["git", "add", "-A", "-f", "."], cwd=workspace, check=True, env=env)
    done = subprocess.run(
        ["git", "write-tree"], cwd=workspace, check=True, env=env, capture_output=True, text=True
    )
    assert done.stdout.strip() == tree


def test_a_run_s_wide_round_and_its_measures_travel_on_the_claim(
    fake_api: FakeApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli
) -> None:
    """The real `crucible run`: three proposals and every measure as Jobs, no ConfigMap at all."""
    from tests.deploy_kubernetes import test_wide_jobs as wide

    manifest = wide.make_domain(tmp_path)
    manifest.write_text(
        manifest.read_text().replace('direction = "lower"', 'direction = "lower"\nneeds = "gpu"')
    )
    claim = tmp_path / "claim"
    claim.mkdir()
    (manifest.parent / "profile.toml").write_text(
        task_profile(f'log_lines = 5\nclaim = "{CLAIM}"\nclaim_mount = "{claim}"\n')
    )
    kubelet = FakeKubelet(fake_api, tmp_path / "node")
    kubelet.claims[CLAIM] = claim
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "kubeconfig"))
    try:
        done = cli("run", "--manifest", manifest, "--iterations", "0", "--ui", "headless")
    finally:
        for thread in kubelet.threads:
            thread.join(timeout=10)
    assert done.returncode == 0, done.stdout + done.stderr
    wide._assert_best_kept(manifest)
    jobs = [json.loads(c["body"]) for c in fake_api.calls_to("POST", f"/apis/batch/v1/namespaces/{NS}/jobs")]
    notes = [e.get("msg", "") for e in wide._events(manifest) if e["kind"] == "note"]
    assert len(jobs) == 7, "\n".join(notes)  # three proposals, the baseline and three candidates measured
    assert not fake_api.calls_to("POST", "/configmaps")
    [run_dir] = (claim / "crucible").iterdir()
    assert not list((run_dir / "attempts").iterdir())


def test_a_claim_not_mounted_here_is_refused_before_any_task_runs(
    fake_api: FakeApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "kubeconfig"))
    profile = tmp_path / "profile.toml"
    profile.write_text(task_profile(f'claim = "{CLAIM}"\nclaim_mount = "{tmp_path / "not-mounted"}"\n'))
    plan = tmp_path / "plan.toml"
    plan.write_text(
        'version = 1\n[budget]\nusd = 1.0\n\n[[task]]\nname = "bench"\nkind = "command"\n'
        'command = "echo {}"\nneeds = "gpu"\n'
    )
    (tmp_path / "ws").mkdir()
    done = cli("plan", "run", plan, "--workspace", tmp_path / "ws", "--deploy-profile", profile)
    assert done.returncode == 10, done.stdout + done.stderr
    assert "is not mounted here" in done.stderr and "[tasks].claim_mount" in done.stderr
    assert not fake_api.calls_to("POST", "/jobs")


def test_a_workspace_over_the_volume_s_bound_is_refused_before_it_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shared_tree, "MAX_SHIPPED_BYTES", 100)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "big.bin").write_bytes(b"x" * 101)
    (workspace / "big.bin").chmod(0)  # were it read, this would fail differently
    store = ObjectStore(tmp_path / "claim", "run")
    with pytest.raises(ValueError, match="holds 101 bytes, more than the shared volume takes"):
        store.ship(workspace)
    assert not store.objects.exists()


@pytest.mark.parametrize("linked", ["objects", "fan-out"])
def test_objects_the_pod_left_behind_a_link_are_never_read(tmp_path: Path, linked: str) -> None:
    """A pod may plant a link in its attempt's directory, pointing into this machine: refused, even
    when what lies behind it is a well-formed object."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "keep.txt").write_text("keep\n")
    store = ObjectStore(tmp_path / "claim", "run")
    shipped = store.ship(workspace).tree
    elsewhere = tmp_path / "this-machine"
    blob = _loose(elsewhere, b"blob", b"planted\n")
    returned = _loose(elsewhere, b"tree", _tree([(b"100644", b"keep.txt", blob)]))
    extra = store.attempt_dir("job") / "objects"
    if linked == "objects":
        extra.symlink_to(elsewhere)
    else:
        extra.mkdir()
        for fan in {blob[:2], returned[:2]}:
            (extra / fan).symlink_to(elsewhere / fan)
    with pytest.raises(ReturnRefused, match="hold a link"):
        store.bring_back(workspace, shipped, returned, extra)
    assert (workspace / "keep.txt").read_text() == "keep\n"
