"""Pinning image tags to content digests by asking the registry (the OCI distribution API).

A tag is mutable; a digest names exactly the bytes that were tested. The render resolves
`name:tag` to `name:tag@sha256:...` with one HEAD request per image (anonymous bearer tokens
are fetched when the registry asks for them), so a rebuilt tag never silently reaches a pod.
"""

from __future__ import annotations

import hashlib
import json
import re
import urllib.error
import urllib.parse
import urllib.request

import attrs

from crucible_deploy_kubernetes.errors import ClusterError

MANIFEST_TYPES = ", ".join(
    (
        "application/vnd.oci.image.index.v1+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.docker.distribution.manifest.v2+json",
    )
)
DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
TIMEOUT = 10.0
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "[::1]")


@attrs.frozen
class ImageRef:
    registry: str  # host[:port] as written, or docker.io
    repository: str
    tag: str | None
    digest: str | None

    @classmethod
    def parse(cls, ref: str) -> ImageRef:
        rest, _, digest = ref.partition("@")
        first, slash, remainder = rest.partition("/")
        if slash and ("." in first or ":" in first or first == "localhost"):
            registry, path = first, remainder
        else:
            registry, path = "docker.io", rest
        name, colon, tag = path.rpartition(":")
        if not colon or "/" in tag:
            name, tag = path, ""
        if registry == "docker.io" and "/" not in name:
            name = f"library/{name}"
        if not name or (digest and not DIGEST.match(digest)):
            raise ValueError(f"{ref!r} is not an image reference")
        return cls(registry, name, tag or None, digest or None)

    @property
    def api_base(self) -> str:
        host = "registry-1.docker.io" if self.registry == "docker.io" else self.registry
        scheme = "http" if host.rsplit(":", 1)[0] in LOOPBACK_HOSTS else "https"
        return f"{scheme}://{host}"

    def pinned(self, digest: str) -> str:
        tag = f":{self.tag}" if self.tag else ""
        name = self.repository.removeprefix("library/") if self.registry == "docker.io" else self.repository
        prefix = "" if self.registry == "docker.io" else f"{self.registry}/"
        return f"{prefix}{name}{tag}@{digest}"


def _bearer_token(challenge: str, timeout: float) -> str | None:
    """Fetch an anonymous token for a `WWW-Authenticate: Bearer realm=...` challenge."""
    if not challenge.lower().startswith("bearer "):
        return None
    params = dict(re.findall(r'(\w+)="([^"]*)"', challenge))
    realm = params.pop("realm", None)
    if not realm:
        return None
    url = f"{realm}?{urllib.parse.urlencode(params)}"
    with urllib.request.urlopen(url, timeout=timeout) as reply:
        body = json.loads(reply.read(64 * 1024))
    token = body.get("token") or body.get("access_token")
    return token if isinstance(token, str) else None


def _request(url: str, method: str, token: str | None, timeout: float) -> tuple[dict[str, str], bytes]:
    headers = {"Accept": MANIFEST_TYPES}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, method=method, headers=headers)
    with urllib.request.urlopen(request, timeout=timeout) as reply:
        body = reply.read(4 * 1024 * 1024) if method == "GET" else b""
        return {k.lower(): v for k, v in reply.headers.items()}, body


def resolve_digest(reference: str, *, timeout: float = TIMEOUT) -> str:
    """`name:tag` -> `name:tag@sha256:...`; a reference already carrying a digest is returned as is."""
    try:
        ref = ImageRef.parse(reference)
    except ValueError as exc:
        raise ClusterError(str(exc), hint="write the image as registry/name:tag") from None
    if ref.digest:
        return reference
    url = f"{ref.api_base}/v2/{ref.repository}/manifests/{ref.tag or 'latest'}"
    hint = "check the tag and the registry, or pass --no-pin to use the tag as written"
    token: str | None = None
    try:
        for method in ("HEAD", "GET"):
            try:
                headers, body = _request(url, method, token, timeout)
            except urllib.error.HTTPError as exc:
                if exc.code != 401 or token is not None:
                    raise
                token = _bearer_token(exc.headers.get("WWW-Authenticate", ""), timeout)
                if token is None:
                    raise
                headers, body = _request(url, method, token, timeout)
            digest = headers.get("docker-content-digest")
            if digest is None and method == "GET" and body:
                digest = "sha256:" + hashlib.sha256(body).hexdigest()
            if digest:
                if not DIGEST.match(digest):
                    raise ClusterError(f"the registry sent a malformed digest {digest!r} for {reference}")
                return ref.pinned(digest)
    except urllib.error.HTTPError as exc:
        raise ClusterError(
            f"cannot pin {reference}: the registry answered {exc.code} {exc.reason}", hint=hint
        ) from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ClusterError(f"cannot pin {reference}: registry unreachable ({reason})", hint=hint) from None
    raise ClusterError(f"cannot pin {reference}: the registry sent no digest", hint=hint)
