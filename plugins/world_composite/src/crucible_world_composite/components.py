"""A composite manifest's own tables: [composite] and its [[component]] domains, checked and loaded.

Core hands a manifest that has either table to the world registered as "composite", whose
`parts=` trait names `load_components`: it checks the composite's rules and loads each
component's domain directory as the manifest it is, reused verbatim.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs

from crucible_core.api import (
    LoadedComponent,
    LoadedManifest,
    ManifestError,
    Plugins,
    UnsupportedSectionError,
    converter,
    describe_structure_error,
    load_manifest,
)


@attrs.frozen
class CompositeSection:
    """[composite] (docs/search.md#composite-worlds): several domains edited together."""

    name: str = ""


@attrs.frozen
class ComponentEntry:
    domain: str  # a domain directory holding its own crucible.toml, relative to this manifest
    name: str | None = None  # its directory inside the composite workspace; default: the domain's name


def component_name(entry: ComponentEntry) -> str:
    return entry.name if entry.name is not None else Path(entry.domain.rstrip("/")).name


def _fail(path: Path, message: str, *, hint: str | None = None) -> ManifestError:
    return ManifestError(f"{path}: {message}", hint=hint)


def _structured(path: Path, cls: type, table: Any, where: str) -> Any:
    try:
        return converter.structure(table, cls)
    except Exception as exc:  # cattrs raises several error types; all are manifest errors here
        problems = "; ".join(describe_structure_error(exc))
        raise _fail(path, f"{where}: {problems}", hint="see `crucible help manifest` for every key") from None


def _plain_name(name: str) -> bool:
    return bool(name) and "/" not in name and name not in (".", "..")


def check_composite(loaded: LoadedManifest) -> tuple[ComponentEntry, ...]:
    """The [[component]] entries of a manifest that passes every composite rule."""
    path, m = loaded.path, loaded.manifest
    if m.composite is None:
        raise _fail(path, "[[component]] entries need a [composite] table", hint="add [composite]")
    _structured(path, CompositeSection, m.composite, "[composite]")
    entries = tuple(
        _structured(path, ComponentEntry, row, f"[[component]][{index}]")
        for index, row in enumerate(m.component)
    )
    if len(entries) < 2:
        raise _fail(path, "[composite] assembles at least two [[component]] entries")
    if m.repo is not None or m.workspace.setup_cmd is not None or m.workspace.carried:
        raise _fail(
            path,
            "a composite has no [repo], setup_cmd, carry_forward or [[workspace.artifact]] of its own: "
            "each [[component]]'s domain brings its own",
        )
    if m.judge is None and not m.playbook:  # a judgeless composite playbook is valid (C-PLAYBOOK-COMPOSITE)
        raise _fail(path, "[composite] needs a [judge]: one combined gate scores the assembled components")
    if m.world.kind or loaded.tables.world:
        raise UnsupportedSectionError(
            f"{path}: [world] in a composite is not supported by this version; each component's own "
            "[world] makes it reversible",
            hint="remove [world] from the composite manifest",
        )
    names = set()
    for index, entry in enumerate(entries):
        name = component_name(entry)
        if not _plain_name(name):
            raise _fail(path, f"[[component]][{index}].name {name!r} must be a plain directory name")
        if name in names:
            raise _fail(path, f"[[component]][{index}]: two components are named {name!r}; set name")
        names.add(name)
    return entries


def load_components(loaded: LoadedManifest, plugins: Plugins) -> tuple[LoadedComponent, ...]:
    """Each [[component]]'s domain directory, loaded as the manifest it is (reused verbatim)."""
    path = loaded.path
    components = []
    for index, entry in enumerate(check_composite(loaded)):
        domain = (path.parent / entry.domain).resolve()
        target = domain / "crucible.toml"
        if not target.is_file():
            raise _fail(
                path,
                f"[[component]][{index}].domain {entry.domain!r} holds no crucible.toml",
                hint="point domain at an existing domain directory",
            )
        if target == path:
            raise _fail(path, f"[[component]][{index}].domain is the composite itself")
        component = load_manifest(target, plugins=plugins)
        if component.components:
            raise _fail(path, f"[[component]][{index}].domain {entry.domain!r} is itself a composite")
        if component.manifest.workspace.artifact:
            # A component's carry_forward still works (its own world spares it); publishing a
            # component's artifacts is not built, and a declaration must never be silently dropped.
            raise UnsupportedSectionError(
                f"{path}: [[component]][{index}].domain {entry.domain!r} declares [[workspace.artifact]], "
                "which a composite does not publish in this version",
                hint="move the artifact paths to the domain's [workspace].carry_forward to keep them carried",
            )
        components.append(LoadedComponent(component_name(entry), component))
    return tuple(components)
