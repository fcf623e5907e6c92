"""Plays the node and the Job controller for task Jobs on the fake API server.

When a Job is created it makes the Job's pod and then, per the script given for that Job:
"run" runs the pod's container command for real under /bin/sh (its workspace laid out from the
ConfigMap volume the Job names, exactly as the kubelet would project it), publishes its output
as the pod log and completes or fails the Job by the exit code; "evict" fails the pod as an
eviction does; "hang" leaves the pod running until someone deletes the Job; "pending" never schedules it.

With `run_pods`, a Pod created directly (the loop or playbook pod `deploy apply` writes) is run
the same way: its volumes laid out under a directory of its own (a ConfigMap's items projected,
an emptyDir or a claim empty), each mount path in its environment standing for that directory.

A claim named in `claims` is a directory this machine shares with the "pods" (a ReadWriteMany
volume): a mount of it (with its subPath) is that directory, so a runner writing there and a
pod reading there see the same files.
"""

from __future__ import annotations

import base64
import os
import subprocess
import threading
from pathlib import Path
from typing import Any

from tests.deploy_kubernetes.fake_apiserver import FakeApiServer


class FakeKubelet:
    def __init__(self, api: FakeApiServer, root: Path) -> None:
        self.api = api
        self.root = root
        self.script: list[str] = []  # one behaviour per created Job, in order; then "run"
        self.ran: list[dict[str, str]] = []  # the environment each run pod's command saw
        self.path_prefix: Path | None = None  # a directory put first on the pods' PATH (a hostile image)
        self.threads: list[threading.Thread] = []
        self.run_pods = False  # also run the Pods created directly (not a Job's), once each
        self.pod_output: dict[str, str] = {}  # pod name -> what its command printed
        self.claims: dict[str, Path] = {}
        self.timeout = (
            60.0  # seconds a Job's command may run  # claim name -> the shared directory it stands for
        )
        api.on_create = self._created

    def _created(self, plural: str, obj: dict[str, Any]) -> None:
        if plural == "pods" and self.run_pods:
            thread = threading.Thread(target=self._play_pod, args=(obj,), daemon=True)
            self.threads.append(thread)
            thread.start()
            return
        if plural != "jobs":
            return
        behaviour = self.script.pop(0) if self.script else "run"
        thread = threading.Thread(target=self._play, args=(obj, behaviour), daemon=True)
        self.threads.append(thread)
        thread.start()

    def _play(self, job: dict[str, Any], behaviour: str) -> None:
        ns, name = job["metadata"]["namespace"], job["metadata"]["name"]
        pod_name = f"{name}-x7k2p"
        labels = {**job["spec"]["template"]["metadata"].get("labels", {}), "job-name": name}
        self.api.put(
            "pods",
            {
                "metadata": {"name": pod_name, "namespace": ns, "labels": labels},
                "status": {"phase": "Pending"},
            },
        )
        if behaviour == "pending":  # no node fits: the pod is never scheduled
            self.api.set_pod_phase(ns, pod_name, "Pending", reason="Unschedulable")
            return
        if behaviour == "evict":
            self.api.set_pod_phase(
                ns, pod_name, "Failed", reason="Evicted", message="The node was low on memory."
            )
            self.api.set_status(
                "jobs", ns, name, failed=1, conditions=[_condition("Failed", "BackoffLimitExceeded")]
            )
            return
        self.api.set_pod_phase(ns, pod_name, "Running")
        if behaviour == "hang":
            return
        code, output = self._run(job, pod_name)
        self.api.logs[(ns, pod_name)] = output
        terminated = {"terminated": {"exitCode": code, "reason": "Completed" if code == 0 else "Error"}}
        self.api.set_pod_phase(
            ns,
            pod_name,
            "Succeeded" if code == 0 else "Failed",
            containerStatuses=[
                {
                    "name": "task",
                    "ready": False,
                    "restartCount": 0,
                    "image": "x",
                    "imageID": "",
                    "state": terminated,
                }
            ],
        )
        if code == 0:
            self.api.set_status("jobs", ns, name, succeeded=1, conditions=[_condition("Complete", None)])
        else:
            self.api.set_status(
                "jobs", ns, name, failed=1, conditions=[_condition("Failed", "BackoffLimitExceeded")]
            )

    def _run(self, job: dict[str, Any], pod: str) -> tuple[int, str]:
        spec = job["spec"]["template"]["spec"]
        [container] = spec["containers"]
        base = self.root / pod
        base.mkdir(parents=True, exist_ok=True)
        env = {e["name"]: e.get("value", "") for e in container.get("env", []) if "value" in e}
        env.update(self._secret_env(job["metadata"]["namespace"], container))
        for mount in container.get("volumeMounts", []):
            volume = next(v for v in spec.get("volumes", []) if v["name"] == mount["name"])
            if "persistentVolumeClaim" in volume:
                shared = self.claims[volume["persistentVolumeClaim"]["claimName"]] / mount.get("subPath", "")
                for key, value in env.items():  # the mount path, as it is on this "node"
                    if value == mount["mountPath"]:
                        env[key] = str(shared)
                continue
            target = base / "pack"
            self._project(job["metadata"]["namespace"], volume["configMap"], target)
            env["CRUCIBLE_TASK_PACK"] = str(target)  # the mount path, as it is on this "node"
        env["CRUCIBLE_TASK_WORKDIR"] = str(base / "work")
        env["PATH"] = os.environ.get("PATH", "/usr/bin:/bin")
        if self.path_prefix is not None:
            env["PATH"] = f"{self.path_prefix}{os.pathsep}{env['PATH']}"
        env["TMPDIR"] = str(base)
        self.ran.append(env)
        done = subprocess.run(
            container["command"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=self.timeout,
        )
        return done.returncode, done.stdout.decode("utf-8", "replace")

    def _play_pod(self, pod: dict[str, Any]) -> None:
        ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        spec = pod["spec"]
        [container] = spec["containers"]
        base = self.root / name
        mounts: dict[str, Path] = {}
        for mount in container.get("volumeMounts", []):
            volume = next(v for v in spec.get("volumes", []) if v["name"] == mount["name"])
            local = base / "volumes" / mount["name"]
            claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
            if claim in self.claims:
                local = self.claims[claim]
            local.mkdir(parents=True, exist_ok=True)
            if "configMap" in volume:
                self._project(ns, volume["configMap"], local)
            mounts[mount["mountPath"]] = local
        env: dict[str, str] = {}
        for entry in container.get("env", []):
            if "value" in entry:
                value = entry["value"]
                for path, local in mounts.items():  # the mount, as it is on this "node"
                    if value == path or value.startswith(path + "/"):
                        value = str(local) + value[len(path) :]
                env[entry["name"]] = value
        env.update(self._secret_env(ns, container))
        env["CRUCIBLE_POD_NAME"], env["CRUCIBLE_POD_NAMESPACE"] = name, ns
        env["PATH"] = os.environ.get("PATH", "/usr/bin:/bin")
        if self.path_prefix is not None:
            env["PATH"] = f"{self.path_prefix}{os.pathsep}{env['PATH']}"
        env["HOME"] = env["TMPDIR"] = str(base)
        self.ran.append(env)
        self.api.set_pod_phase(ns, name, "Running")
        done = subprocess.run(
            [*container["command"], *container.get("args", [])],
            env=env,
            cwd=base,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=120,
        )
        output = done.stdout.decode("utf-8", "replace")
        self.pod_output[name] = output
        self.api.logs[(ns, name)] = output
        self.api.set_pod_phase(ns, name, "Succeeded" if done.returncode == 0 else "Failed")

    def _project(self, namespace: str, source: dict[str, Any], target: Path) -> None:
        """A ConfigMap volume's items, written where the kubelet would project them."""
        configmap = self.api.get("configmaps", namespace, source["name"]) or {}
        for item in source.get("items", []):
            path = target / item["path"]
            path.parent.mkdir(parents=True, exist_ok=True)
            if item["key"] in (configmap.get("data") or {}):
                path.write_text(configmap["data"][item["key"]])
            else:
                path.write_bytes(base64.b64decode(configmap["binaryData"][item["key"]]))
            path.chmod(item.get("mode", 0o644))

    def _secret_env(self, namespace: str, container: dict[str, Any]) -> dict[str, str]:
        """The variables a container takes from Secrets (secretKeyRef), as the kubelet resolves them."""
        found: dict[str, str] = {}
        for entry in container.get("env", []):
            ref = (entry.get("valueFrom") or {}).get("secretKeyRef")
            secret = self.api.get("secrets", namespace, ref["name"]) if ref else None
            if ref and secret and ref["key"] in (secret.get("data") or {}):
                found[entry["name"]] = base64.b64decode(secret["data"][ref["key"]]).decode()
        return found


def _condition(kind: str, reason: str | None) -> dict[str, Any]:
    condition: dict[str, Any] = {"type": kind, "status": "True"}
    if reason:
        condition["reason"] = reason
    return condition
