"""The service catalog: which tools this run supervisor attests, where their executables are, and their digests.

The operator names the catalog document in CRUCIBLE_SERVICE_CATALOG; with none named nothing is
attested. Each `[[tool]]` entry pins an absolute executable by its sha256, which is checked when
the run resolves its services and again just before every start, so a file changed underneath
the catalog is refused by name.

Plugins install tools (`ServiceTool`, registered through crucible_register_services); that is
discovery only. `crucible services catalog` writes their entries (`catalog_text`) for the operator
to review and name, and a run trusts nothing but the document it reads here.
"""

from __future__ import annotations

import enum
import hashlib
import os
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs

from crucible_core.contract.records import value_methods
from crucible_core.errors import ManifestError
from crucible_core.manifest.semver import SemverError, parse_version
from crucible_core.toml_text import document as toml_document

CATALOG_ENV = "CRUCIBLE_SERVICE_CATALOG"
MAX_CATALOG_BYTES = 1 << 20
_ENTRY_KEYS = frozenset(
    {
        "name",
        "executable",
        "sha256",
        "version",
        "transport",
        "mcp_path",
        "creates_external_resources",
        "concurrent_clients",
        "handoff",
        "reclaim_args",
    }
)
MAX_RECLAIM_ARGS = 64
MAX_RECLAIM_ARG_CHARS = 4096
_HANDOFF_KEYS = frozenset({"file", "env", "target", "scope"})


class Transport(enum.StrEnum):
    MCP_HTTP = "mcp-http"  # MCP streamable HTTP at mcp_path
    MCP_STDIO = "mcp-stdio"
    HTTP = "http"

    @property
    def mcp(self) -> bool:
        """Tasks see the service as the MCP server `service.<name>` at mcp_path."""
        return self is not Transport.HTTP


# Core reads the catalog's transport names; serving them is a plugin's work
# (crucible_register_service_transports), and this distribution serves all three.
TRANSPORTS_DISTRIBUTION = "crucible-plugin-service-transports"


class CatalogError(ManifestError):
    """The catalog document itself is unreadable or malformed."""

    def __init__(self, message: str) -> None:
        super().__init__(
            message, hint=f"fix the document {CATALOG_ENV} names (docs/services.md, 'The catalog')"
        )


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class Handoff:
    """A credential the tool writes for tasks that need it (a kubeconfig), and what it grants."""

    file: str  # relative to the service's handoff directory
    env: str  # the variable a needing task finds its path in
    target: str
    scope: str


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class CatalogEntry:
    name: str
    executable: Path
    sha256: str
    version: str
    transport: Transport
    mcp_path: str = "/mcp"
    creates_external_resources: bool = False
    concurrent_clients: bool = True
    handoff: Handoff | None = None
    # A one-shot run of the same executable that reclaims what an earlier instance under the run
    # id created, then exits: a resumed run uses it instead of starting a service no task needs.
    reclaim_args: tuple[str, ...] | None = None


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class ServiceTool:
    """A service tool a plugin installs (crucible_register_services), described as a catalog entry
    would describe it; `entry(name)` is that entry with the executable's sha256 as it is now.

    Registering a tool attests nothing: a run reads only the catalog the operator names.
    """

    executable: Path  # absolute
    version: str
    transport: Transport = attrs.field(converter=Transport)
    creates_external_resources: bool
    concurrent_clients: bool
    mcp_path: str = "/mcp"
    handoff: Handoff | None = None
    reclaim_args: tuple[str, ...] | None = None

    def entry(self, name: str) -> CatalogEntry:
        """This tool's catalog entry under `name`; raises OSError when the executable cannot be read."""
        # every field of the tool is the entry's field of the same name: a field added to both
        # cannot be forgotten here
        return CatalogEntry(
            name=name, sha256=file_sha256(self.executable), **attrs.asdict(self, recurse=False)
        )


# What crucible_register_services takes: called only by `crucible services`, so registering is free.
ServiceToolFactory = Callable[[], ServiceTool]


def catalog_text(entries: list[CatalogEntry]) -> str:
    """A catalog document holding `entries`, in the format load_catalog reads."""
    tables: list[dict[str, Any]] = []
    for entry in entries:
        table: dict[str, Any] = {
            "name": entry.name,
            "executable": str(entry.executable),
            "sha256": entry.sha256,
            "version": entry.version,
            "transport": entry.transport.value,
            "mcp_path": entry.mcp_path,
            "creates_external_resources": entry.creates_external_resources,
            "concurrent_clients": entry.concurrent_clients,
        }
        if entry.handoff is not None:
            table["handoff"] = attrs.asdict(entry.handoff)
        if entry.reclaim_args is not None:
            table["reclaim_args"] = list(entry.reclaim_args)
        tables.append(table)
    return toml_document({"tool": tables})


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class Catalog:
    source: str  # the path read, or a sentence saying none was named
    entries: tuple[CatalogEntry, ...] = ()

    def entry(self, name: str) -> CatalogEntry | None:
        return next((entry for entry in self.entries if entry.name == name), None)


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 16), b""):
            digest.update(chunk)
    return digest.hexdigest()


def digest_problem(entry: CatalogEntry) -> str | None:
    """Why the entry's executable is not the file the catalog attests, or None when it is."""
    try:
        actual = file_sha256(entry.executable)
    except OSError as exc:
        return f"tool {entry.name!r}: cannot read its executable {entry.executable}: {exc.strerror or exc}"
    if actual != entry.sha256:
        return f"tool {entry.name!r}: executable {entry.executable} does not match its catalog sha256"
    if not os.access(entry.executable, os.X_OK):
        return f"tool {entry.name!r}: executable {entry.executable} is not executable"
    return None


def load_catalog(env: Mapping[str, str]) -> Catalog:
    named = env.get(CATALOG_ENV, "").strip()
    if not named:
        return Catalog(f"none ({CATALOG_ENV} is not set): no tool is attested")
    path = Path(named)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise CatalogError(f"cannot read the service catalog {path}: {exc.strerror or exc}") from None
    if len(data) > MAX_CATALOG_BYTES:
        raise CatalogError(f"the service catalog {path} is over {MAX_CATALOG_BYTES} bytes")
    try:
        table = tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise CatalogError(f"the service catalog {path} is not valid TOML: {exc}") from None
    unknown = sorted(set(table) - {"tool"})
    raw = table.get("tool", [])
    if unknown or not isinstance(raw, list) or not all(isinstance(t, dict) for t in raw):
        raise CatalogError(f"the service catalog {path} must hold only [[tool]] tables")
    problems: list[str] = []
    entries = [entry for entry in (_entry(i, t, problems) for i, t in enumerate(raw)) if entry]
    names = [entry.name for entry in entries]
    problems += [f"tool {n!r} is listed twice" for n in sorted({n for n in names if names.count(n) > 1})]
    if problems:
        raise CatalogError(f"the service catalog {path} is refused: " + "; ".join(problems))
    return Catalog(str(path), tuple(entries))


def _entry(index: int, raw: dict[str, Any], problems: list[str]) -> CatalogEntry | None:
    where = f"[[tool]] #{index + 1}" + (f" ({raw['name']!r})" if isinstance(raw.get("name"), str) else "")
    start = len(problems)
    unknown = sorted(set(raw) - _ENTRY_KEYS)
    if unknown:
        problems.append(f"{where}: unknown key(s) {', '.join(unknown)}")
    for key in ("name", "executable", "sha256", "version", "transport"):
        if not isinstance(raw.get(key), str) or not raw[key]:
            problems.append(f"{where}: {key} is required (a string)")
    for key in ("creates_external_resources", "concurrent_clients"):
        if not isinstance(raw.get(key), bool):
            problems.append(f"{where}: {key} is required (true or false)")
    if len(problems) > start:
        return None
    executable = Path(raw["executable"])
    if not executable.is_absolute():
        problems.append(f"{where}: executable must be an absolute path")
    sha = raw["sha256"].lower()
    if len(sha) != 64 or any(c not in "0123456789abcdef" for c in sha):
        problems.append(f"{where}: sha256 must be 64 hex digits")
    try:
        parse_version(raw["version"])
    except SemverError as exc:
        problems.append(f"{where}: version: {exc}")
    try:
        transport = Transport(raw["transport"])
    except ValueError:
        problems.append(f"{where}: transport must be one of {', '.join(t.value for t in Transport)}")
        transport = Transport.HTTP
    mcp_path = raw.get("mcp_path", "/mcp")
    if not isinstance(mcp_path, str) or not mcp_path.startswith("/"):
        problems.append(f"{where}: mcp_path must start with /")
    handoff = _handoff(where, raw.get("handoff"), problems)
    reclaim = raw.get("reclaim_args")
    if reclaim is not None and (
        not isinstance(reclaim, list)
        or len(reclaim) > MAX_RECLAIM_ARGS
        or not all(isinstance(a, str) and len(a) <= MAX_RECLAIM_ARG_CHARS and "\0" not in a for a in reclaim)
    ):
        problems.append(f"{where}: reclaim_args must be a list of at most {MAX_RECLAIM_ARGS} strings")
    if len(problems) > start:
        return None
    return CatalogEntry(
        name=raw["name"],
        executable=executable,
        sha256=sha,
        version=raw["version"],
        transport=transport,
        mcp_path=mcp_path,
        creates_external_resources=raw["creates_external_resources"],
        concurrent_clients=raw["concurrent_clients"],
        handoff=handoff,
        reclaim_args=tuple(reclaim) if reclaim is not None else None,
    )


def _handoff(where: str, raw: Any, problems: list[str]) -> Handoff | None:
    if raw is None:
        return None
    if (
        not isinstance(raw, dict)
        or set(raw) != _HANDOFF_KEYS
        or not all(isinstance(v, str) for v in raw.values())
    ):
        problems.append(f"{where}: handoff must be a table of file, env, target and scope (strings)")
        return None
    file = raw["file"]
    if not file or file.startswith("/") or ".." in Path(file).parts or "\0" in file:
        problems.append(f"{where}: handoff.file must be a relative path inside the handoff directory")
        return None
    if not raw["env"].replace("_", "").isalnum() or raw["env"].startswith("CRUCIBLE_"):
        problems.append(f"{where}: handoff.env must be a plain variable name outside CRUCIBLE_*")
        return None
    return Handoff(file, raw["env"], raw["target"], raw["scope"])
