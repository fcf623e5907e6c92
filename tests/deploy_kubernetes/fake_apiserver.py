"""A loopback stand-in for a Kubernetes API server, speaking its REST wire for the resources crucible uses.

Create, get, list (label and field selectors), watch, delete and server-side apply for pods,
jobs, secrets, configmaps, service accounts, PVCs, roles and role bindings; pod logs (tail and
follow); pod exec over the v4 channel websocket protocol. It records every call, can script pod
phases and job conditions, and can answer any call with an API error. Driven through the real
`kubernetes` client with a generated kubeconfig.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import struct
import threading
import time
import urllib.parse
from collections.abc import Callable
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

CORE = {
    "pods": "Pod",
    "secrets": "Secret",
    "configmaps": "ConfigMap",
    "serviceaccounts": "ServiceAccount",
    "persistentvolumeclaims": "PersistentVolumeClaim",
}
GROUPED = {
    ("batch", "jobs"): "Job",
    ("rbac.authorization.k8s.io", "roles"): "Role",
    ("rbac.authorization.k8s.io", "rolebindings"): "RoleBinding",
}
WATCH_TICK = 0.02
FOLLOW_WAIT = 30.0  # the longest a log follower waits for a running pod's first line
WS_MAGIC = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


def _matches(obj: dict[str, Any], labels: str | None, fields: str | None) -> bool:
    have = obj.get("metadata", {}).get("labels") or {}
    for term in filter(None, (labels or "").split(",")):
        key, _, value = term.partition("=")
        if have.get(key) != value:
            return False
    for term in filter(None, (fields or "").split(",")):
        key, _, value = term.partition("=")
        if key == "metadata.name" and obj["metadata"].get("name") != value:
            return False
        if key == "metadata.namespace" and obj["metadata"].get("namespace") != value:
            return False
    return True


class FakeApiServer:
    def __init__(self) -> None:
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.calls: list[dict[str, Any]] = []
        self.logs: dict[tuple[str, str], str] = {}
        self.exec_replies: dict[tuple[str, str], tuple[str, int]] = {}  # (ns, pod) -> (stdout, exit code)
        self.phase_script: dict[tuple[str, str], list[Any]] = {}  # (ns, name) -> steps applied per watch tick
        self.errors: list[tuple[str, str, int, str]] = []  # (method, path regex, code, message): one-shot
        self.on_create: Callable[[str, dict[str, Any]], None] | None = None
        self.lock = threading.Lock()
        self.version = 0
        self.resource_version = 100
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                fake._dispatch(self, "GET")

            def do_POST(self) -> None:
                fake._dispatch(self, "POST")

            def do_PATCH(self) -> None:
                fake._dispatch(self, "PATCH")

            def do_DELETE(self) -> None:
                fake._dispatch(self, "DELETE")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    # -- lifecycle ----------------------------------------------------------------------------
    def __enter__(self) -> FakeApiServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def kubeconfig(self, path: Path, namespace: str = "default") -> Path:
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": "fake",
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "tester", "user": {"token": "fake-token"}}],
            "contexts": [
                {"name": "fake", "context": {"cluster": "fake", "user": "tester", "namespace": namespace}}
            ],
        }
        path.write_text(yaml.safe_dump(config))
        return path

    # -- test helpers -------------------------------------------------------------------------
    def put(self, plural: str, obj: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            return self._store(plural, obj)

    def get(self, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        return self.objects.get((plural, namespace, name))

    def set_pod_phase(self, namespace: str, name: str, phase: str, **status: Any) -> None:
        with self.lock:
            pod = self.objects[("pods", namespace, name)]
            pod.setdefault("status", {}).update({"phase": phase, **status})
            self._bump(pod)

    def set_status(self, plural: str, namespace: str, name: str, **status: Any) -> None:
        """Update an object's status as a controller would (watchers and readers see it next)."""
        with self.lock:
            obj = self.objects.get((plural, namespace, name))
            if obj is None:
                return
            obj.setdefault("status", {}).update(status)
            self._bump(obj)

    def fail(self, method: str, path_pattern: str, code: int, message: str) -> None:
        self.errors.append((method, path_pattern, code, message))

    def calls_to(self, method: str, fragment: str) -> list[dict[str, Any]]:
        return [c for c in self.calls if c["method"] == method and fragment in c["path"]]

    # -- storage ------------------------------------------------------------------------------
    def _bump(self, obj: dict[str, Any]) -> None:
        self.resource_version += 1
        self.version += 1
        obj["metadata"]["resourceVersion"] = str(self.resource_version)

    def _store(self, plural: str, obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj.setdefault("metadata", {})
        key = (plural, meta.get("namespace", "default"), meta["name"])
        meta.setdefault("namespace", key[1])
        meta.setdefault("uid", hashlib.sha1(repr(key).encode()).hexdigest()[:8])
        meta.setdefault("creationTimestamp", datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
        if plural == "pods":
            obj.setdefault("status", {"phase": "Pending"})
        if plural == "jobs":
            obj.setdefault("status", {})
        self.objects[key] = obj
        self._bump(obj)
        return obj

    # -- the wire -----------------------------------------------------------------------------
    def _route(self, path: str) -> tuple[str | None, str | None, str | None, str | None]:
        """(plural, namespace, name, subresource) for a resource path."""
        m = re.fullmatch(
            r"/(?:api/v1|apis/(?P<group>[^/]+)/v1)(?:/namespaces/(?P<ns>[^/]+))?/(?P<plural>[a-z]+)"
            r"(?:/(?P<name>[^/]+)(?:/(?P<sub>[a-z]+))?)?",
            path,
        )
        if not m:
            return None, None, None, None
        group, plural = m["group"], m["plural"]
        known = plural in CORE if group is None else (group, plural) in GROUPED
        return (plural if known else None), m["ns"], m["name"], m["sub"]

    def _dispatch(self, h: BaseHTTPRequestHandler, method: str) -> None:
        parsed = urllib.parse.urlsplit(h.path)
        query = dict(urllib.parse.parse_qsl(parsed.query))
        length = int(h.headers.get("Content-Length") or 0)
        raw = h.rfile.read(length) if length else b""
        record = {
            "method": method,
            "path": parsed.path,
            "query": query,
            "content_type": h.headers.get("Content-Type"),
            "body": raw.decode("utf-8", "replace"),
        }
        self.calls.append(record)
        for i, (m, pattern, code, message) in enumerate(self.errors):
            if m == method and re.search(pattern, parsed.path):
                del self.errors[i]
                return self._send(h, code, _status(code, "Injected", message))
        plural, ns, name, sub = self._route(parsed.path)
        if plural is None:
            return self._send(h, 404, _status(404, "NotFound", f"the server could not find {parsed.path}"))
        if sub == "log":
            return self._log(h, ns or "default", name or "", query)
        if sub == "exec":
            return self._exec(h, ns or "default", name or "", query)
        if method == "GET" and name is None:
            if query.get("watch") in ("true", "1"):
                return self._watch(h, plural, ns, query)
            with self.lock:
                items = [
                    o
                    for (p, n, _), o in sorted(self.objects.items())
                    if p == plural
                    and (ns is None or n == ns)
                    and _matches(o, query.get("labelSelector"), query.get("fieldSelector"))
                ]
            return self._send(
                h,
                200,
                {
                    "kind": "List",
                    "apiVersion": "v1",
                    "metadata": {"resourceVersion": str(self.resource_version)},
                    "items": items,
                },
            )
        key = (plural, ns or "default", name or "")
        if method == "GET":
            obj = self.objects.get(key)
            if obj is None:
                return self._send(h, 404, _status(404, "NotFound", f'{plural} "{name}" not found'))
            return self._send(h, 200, obj)
        if method == "DELETE":
            with self.lock:
                obj = self.objects.pop(key, None)
                self.version += 1
            if obj is None:
                return self._send(h, 404, _status(404, "NotFound", f'{plural} "{name}" not found'))
            return self._send(h, 200, obj)
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = yaml.safe_load(raw)
        if method == "POST":
            if not isinstance(body, dict) or not body.get("metadata", {}).get("name"):
                return self._send(h, 422, _status(422, "Invalid", "metadata.name is required"))
            body["metadata"].setdefault("namespace", ns)
            with self.lock:
                if (plural, ns, body["metadata"]["name"]) in self.objects:
                    return self._send(
                        h,
                        409,
                        _status(
                            409, "AlreadyExists", f'{plural} "{body["metadata"]["name"]}" already exists'
                        ),
                    )
                obj = self._store(plural, body)
            if self.on_create:
                self.on_create(plural, obj)
            return self._send(h, 201, obj)
        if method == "PATCH":
            if record["content_type"] != "application/apply-patch+yaml":
                return self._send(
                    h, 415, _status(415, "UnsupportedMediaType", "only server-side apply is served")
                )
            if not query.get("fieldManager"):
                return self._send(h, 422, _status(422, "Invalid", "fieldManager is required for apply"))
            if body.get("metadata", {}).get("name") != name:
                return self._send(
                    h, 400, _status(400, "BadRequest", "the name in the body does not match the URL")
                )
            with self.lock:
                existing = self.objects.get(key)
                created = existing is None
                if existing is not None:
                    status = existing.get("status")
                    meta = existing["metadata"]
                    body["metadata"] = {**meta, **body["metadata"]}
                    if status is not None:
                        body["status"] = status
                body["metadata"]["managedFields"] = [{"manager": query["fieldManager"], "operation": "Apply"}]
                obj = self._store(plural, body)
            if created and self.on_create:
                self.on_create(plural, obj)
            return self._send(h, 201 if created else 200, obj)
        return self._send(h, 405, _status(405, "MethodNotAllowed", method))

    def _send(self, h: BaseHTTPRequestHandler, code: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        h.send_response(code)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)

    def _chunk(self, h: BaseHTTPRequestHandler, data: bytes) -> None:
        h.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        h.wfile.flush()

    def _watch(self, h: BaseHTTPRequestHandler, plural: str, ns: str | None, query: dict[str, str]) -> None:
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()
        deadline = time.monotonic() + min(float(query.get("timeoutSeconds", 30)), 30)
        seen: dict[tuple[str, str, str], str] = {}
        try:
            while time.monotonic() < deadline:
                with self.lock:
                    for key, steps in self.phase_script.items():
                        target = self.objects.get((plural, *key))
                        if (
                            target is not None
                            and steps
                            and key[0] == (ns or key[0])
                            and key in {k[1:] for k in seen}
                        ):
                            step = steps.pop(0)
                            if isinstance(step, str):
                                target.setdefault("status", {})["phase"] = step
                            else:
                                target.setdefault("status", {}).update(step)
                            self._bump(target)
                    current = {
                        k: o
                        for k, o in self.objects.items()
                        if k[0] == plural
                        and (ns is None or k[1] == ns)
                        and _matches(o, query.get("labelSelector"), query.get("fieldSelector"))
                    }
                    events = []
                    for key, obj in current.items():
                        rv = obj["metadata"]["resourceVersion"]
                        if seen.get(key) != rv:
                            events.append({"type": "ADDED" if key not in seen else "MODIFIED", "object": obj})
                            seen[key] = rv
                    for key in [k for k in seen if k not in current]:
                        events.append(
                            {"type": "DELETED", "object": {"metadata": {"name": key[2], "namespace": key[1]}}}
                        )
                        del seen[key]
                for event in events:
                    self._chunk(h, (json.dumps(event) + "\n").encode())
                time.sleep(WATCH_TICK)
            self._chunk(h, b"")
        except (BrokenPipeError, ConnectionResetError):
            pass
        h.close_connection = True

    def _log(self, h: BaseHTTPRequestHandler, ns: str, name: str, query: dict[str, str]) -> None:
        if ("pods", ns, name) not in self.objects:
            return self._send(h, 404, _status(404, "NotFound", f'pods "{name}" not found'))
        if query.get("follow") == "true":
            # A follower of a running container gets its lines as they come. The fake kubelet
            # writes a pod's whole log when it ends, so wait for the first text or the end (bounded),
            # or a follower that connected while the pod ran would read an empty log.
            deadline = time.monotonic() + FOLLOW_WAIT
            while time.monotonic() < deadline and not self.logs.get((ns, name)):
                with self.lock:
                    pod = self.objects.get(("pods", ns, name)) or {}
                    job = pod.get("metadata", {}).get("labels", {}).get("job-name")
                    # deleting a Job deletes its pod, which ends every stream of its log
                    orphaned = job is not None and ("jobs", ns, job) not in self.objects
                if not pod or orphaned or pod.get("status", {}).get("phase") in ("Succeeded", "Failed"):
                    break
                time.sleep(WATCH_TICK)
        text = self.logs.get((ns, name), "")
        if query.get("tailLines"):
            lines = text.splitlines(keepends=True)
            text = "".join(lines[-int(query["tailLines"]) :])
        h.send_response(200)
        h.send_header("Content-Type", "text/plain")
        h.send_header("Transfer-Encoding", "chunked")
        # It closes the connection after the log, and says so: a client must not take the
        # connection back into its pool (reused, it would fail the next call at random).
        h.send_header("Connection", "close")
        h.end_headers()
        data = text.encode()
        # Stream in small uneven pieces, so a follower must reassemble lines across chunks.
        for start in range(0, len(data), 37):
            self._chunk(h, data[start : start + 37])
        self._chunk(h, b"")
        h.close_connection = True

    def _exec(self, h: BaseHTTPRequestHandler, ns: str, name: str, query: dict[str, str]) -> None:
        command = urllib.parse.parse_qs(urllib.parse.urlsplit(h.path).query).get("command", [])
        self.calls[-1]["command"] = command
        if ("pods", ns, name) not in self.objects:
            return self._send(h, 404, _status(404, "NotFound", f'pods "{name}" not found'))
        key = h.headers.get("Sec-WebSocket-Key", "")
        accept = base64.b64encode(hashlib.sha1((key + WS_MAGIC).encode()).digest()).decode()
        h.send_response(101)
        h.send_header("Upgrade", "websocket")
        h.send_header("Connection", "Upgrade")
        h.send_header("Sec-WebSocket-Accept", accept)
        h.send_header("Sec-WebSocket-Protocol", "v4.channel.k8s.io")
        h.end_headers()
        stdout, code = self.exec_replies.get((ns, name), ("", 0))
        if code == 0:
            status = {"metadata": {}, "status": "Success"}
        else:
            status = {
                "metadata": {},
                "status": "Failure",
                "reason": "NonZeroExitCode",
                "message": f"command terminated with non-zero exit code: {code}",
                "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]},
            }
        for channel, payload in ((1, stdout.encode()), (3, json.dumps(status).encode())):
            self._ws_frame(h, 0x2, bytes([channel]) + payload)
        self._ws_frame(h, 0x8, struct.pack("!H", 1000))
        h.wfile.flush()
        h.close_connection = True

    @staticmethod
    def _ws_frame(h: BaseHTTPRequestHandler, opcode: int, payload: bytes) -> None:
        header = bytes([0x80 | opcode])
        n = len(payload)
        if n < 126:
            header += bytes([n])
        elif n < 65536:
            header += bytes([126]) + struct.pack("!H", n)
        else:
            header += bytes([127]) + struct.pack("!Q", n)
        h.wfile.write(header + payload)
