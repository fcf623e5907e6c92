"""The openshell backend's manifest keys: [agent].sandbox_image and the [agent.openshell] table.

Validated by crucible core's strict converter (plugin-owned settings): an unknown key or a
malformed endpoint is refused with its key path, naming this plugin. Importing this module
is cheap; nothing here touches grpc.
"""

from __future__ import annotations

import re

import attrs

from crucible_core.api import EgressEndpoint, EgressReach, Seconds

ACCESS_CLASSES = ("read-only", "read-write", "full")
ENFORCEMENT_MODES = ("enforce", "audit")
_HOST = re.compile(r"(\*\.)?[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?")
_BINARY = re.compile(r"/[^\0\n]{0,1023}")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
_PROVIDER = re.compile(r"[a-z0-9][a-z0-9_.-]{0,62}")


@attrs.frozen
class Endpoint:
    """One egress allowance: a host (or `*.domain`), a port and an access class."""

    host: str
    port: int
    access: str = "full"
    protocol: str = ""  # "" lets the gateway decide; "rest" turns on L7 inspection
    enforcement: str = "enforce"

    def __attrs_post_init__(self) -> None:
        if not _HOST.fullmatch(self.host):
            raise ValueError(f"endpoint host {self.host!r} is not a host name (or *.domain)")
        if not 1 <= self.port <= 65535:
            raise ValueError(f"endpoint {self.host}: port {self.port} is not between 1 and 65535")
        if self.access not in ACCESS_CLASSES:
            raise ValueError(
                f"endpoint {self.host}: access {self.access!r} is not one of {', '.join(ACCESS_CLASSES)}"
            )
        if self.enforcement not in ENFORCEMENT_MODES:
            raise ValueError(
                f"endpoint {self.host}: enforcement {self.enforcement!r} is not enforce or audit"
            )

    @classmethod
    def parse(cls, text: str) -> Endpoint:
        """`host:port:access[:protocol[:enforcement]]`, the manifest's short form."""
        parts = text.split(":")
        if not 3 <= len(parts) <= 5 or not parts[1].isdigit():
            raise ValueError(f"endpoint {text!r} is not host:port:access[:protocol[:enforcement]]")
        protocol = parts[3] if len(parts) > 3 else ""
        enforcement = parts[4] if len(parts) > 4 else "enforce"
        return cls(parts[0], int(parts[1]), parts[2], protocol, enforcement)

    def spelled(self) -> str:
        tail = f":{self.protocol}" if self.protocol or self.enforcement != "enforce" else ""
        tail += f":{self.enforcement}" if self.enforcement != "enforce" else ""
        return f"{self.host}:{self.port}:{self.access}{tail}"


@attrs.frozen
class Timeouts:
    connect: Seconds = Seconds(30.0)  # each gateway call (create, get, delete)
    ready: Seconds = Seconds(300.0)  # from create until the sandbox reports ready
    transfer: Seconds = Seconds(120.0)  # uploading the workspace, downloading the edits


@attrs.frozen
class OpenShellTable:
    """[agent.openshell]: where the gateway is, how to authenticate, and what the sandbox may reach."""

    # host:port of the gateway's gRPC API; absent: the active gateway of the openshell CLI config
    gateway: str | None = None
    # Where the bearer for the gateway comes from: "env:NAME" (an engine variable, never the
    # sandbox's), "active-gateway" (the openshell CLI's stored login), or "none" (plaintext loopback).
    credentials: str = "none"
    namespace: str = "default"  # the gateway workspace the sandboxes are created in
    endpoints: tuple[str, ...] = ()  # extra egress, "host:port:access[:protocol[:enforcement]]"
    binaries: tuple[str, ...] = ()  # only these programs may open a socket (added to the built-ins)
    inherit_defaults: bool = True  # false: the egress is exactly endpoints + binaries
    # Provider credentials the gateway holds and injects into the sandbox (the gateway's own
    # mechanism); the key never passes through crucible, the workspace or the manifest.
    providers: tuple[str, ...] = ()
    timeouts: Timeouts = Timeouts()
    max_transfer_bytes: int = 256 * 1024 * 1024  # a workspace (or its edits) larger than this is refused

    def __attrs_post_init__(self) -> None:
        if self.gateway is not None:
            host, _, port = self.gateway.rpartition(":")
            if not host or not port.isdigit():
                raise ValueError(f"gateway {self.gateway!r} must be host:port")
        if not (self.credentials in ("none", "active-gateway") or self.credentials.startswith("env:")):
            raise ValueError(
                f'credentials {self.credentials!r} must be "none", "active-gateway" or "env:NAME"'
            )
        if self.credentials.startswith("env:") and not _ENV_NAME.fullmatch(self.credentials[4:]):
            raise ValueError(f"credentials {self.credentials!r} does not name an environment variable")
        for text in self.endpoints:
            Endpoint.parse(text)
        for binary in self.binaries:
            if not _BINARY.fullmatch(binary):
                raise ValueError(f"binary {binary!r} must be an absolute path")
        for provider in self.providers:
            if not _PROVIDER.fullmatch(provider):
                raise ValueError(f"provider {provider!r} is not a gateway provider name")
        if self.max_transfer_bytes < 1:
            raise ValueError("max_transfer_bytes must be positive")

    def parsed_endpoints(self) -> tuple[Endpoint, ...]:
        return tuple(Endpoint.parse(text) for text in self.endpoints)


@attrs.frozen
class OpenShellSettings:
    """The openshell backend's keys: `sandbox_image` in [agent], the rest in [agent.openshell]."""

    sandbox_image: str
    openshell: OpenShellTable = OpenShellTable()

    def __attrs_post_init__(self) -> None:
        if not self.sandbox_image.strip() or any(c.isspace() for c in self.sandbox_image):
            raise ValueError("sandbox_image must name a container image (no spaces)")

    def describe_resolved(self) -> list[str]:
        """What `crucible check` prints: the sandbox, the gateway, the resolved egress."""
        from crucible_backend_openshell.egress import resolve_egress

        table = self.openshell
        gateway = table.gateway or "the openshell CLI's active gateway"
        providers = ", ".join(table.providers) or "none"
        return [
            f"sandbox image {self.sandbox_image}, a fresh sandbox per turn, deleted after it",
            f"gateway {gateway} (namespace {table.namespace}, credentials {table.credentials})",
            f"provider credentials held by the gateway: {providers}",
            *resolve_egress(table).describe(),
        ]

    def disclosed_egress(self) -> EgressReach:
        """The capability disclosure's egress (core's seam, crucible_core.broker.reach): exactly the
        allowlist every sandbox of this run is created with, built-ins and manifest entries labelled."""
        from crucible_backend_openshell.egress import resolve_egress

        resolved = resolve_egress(self.openshell)
        return EgressReach(
            restricted=True,
            endpoints=tuple(
                EgressEndpoint(e.endpoint.host, e.endpoint.port, e.endpoint.access, e.source)
                for e in resolved.entries
            ),
            binaries=resolved.binaries,
            sandbox=f"openshell sandbox (image {self.sandbox_image}, a fresh one per turn, deny-by-default egress)",
        )
