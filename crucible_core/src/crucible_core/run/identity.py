"""RunIdentity from a loaded manifest: the comparability key of a run, as the contract computes it.

The record and its digest live in `wire.py`; this module gathers the inputs (the repository,
the pristine base commit, the frozen manifest text hash, the inject hash, measure_cmd and
direction) from a manifest and a workspace's base commit, and each resolved run service's digest.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

from crucible_core.contract import wire
from crucible_core.manifest.loader import LoadedManifest
from crucible_core.run import part_tokens

if TYPE_CHECKING:  # loaded where a run declares services
    from crucible_core.services.resolve import Resolution


def _h(data: bytes | str) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def inject_hash(loaded: LoadedManifest) -> str:
    """One hash over every inject's destination and source content, in destination order."""
    inject = hashlib.sha256()
    for entry in sorted(loaded.injects, key=lambda e: e.destination):
        inject.update(entry.destination.encode() + b"\0")
        inject.update(_h(entry.source.read_bytes()).encode() + b"\n")
    return inject.hexdigest()


def _repo(loaded: LoadedManifest) -> str:
    m = loaded.manifest
    return str((m.repo.url or m.repo.path or "") if m.repo else "")


def components(loaded: LoadedManifest, base_commit: str) -> list[wire.ComponentIdentity]:
    """One unnamed entry for a single domain; one per [[component]] for a composite, whose
    base is the composite token of every component's base commit."""
    if not loaded.components:
        return [wire.ComponentIdentity(name="", repo=_repo(loaded), base_sha=base_commit)]
    bases = part_tokens.decode(base_commit) if base_commit else {}
    return [
        wire.ComponentIdentity(name=c.name, repo=_repo(c.loaded), base_sha=bases.get(c.name, ""))
        for c in loaded.components
    ]


def run_identity(
    loaded: LoadedManifest,
    base_commit: str,
    workflow: str | None = None,
    services: Resolution | None = None,
    provenance: str | None = None,
) -> wire.RunIdentity:
    """`workflow`: the compiled workflow TOML the run froze (its bound params included); None
    compiles the manifest's own again with default params. `services`: the run's resolved
    services (this process's catalog), covered one digest each. `provenance`: what the manifest's
    directory was copied from (crucible_domain_packs), if anything."""
    m = loaded.manifest
    return wire.RunIdentity.build(
        components=components(loaded, base_commit),
        manifest_hash=manifest_hash(loaded, workflow, provenance),
        inject_hash=inject_hash(loaded),
        measure_cmd=(m.judge.measure_cmd or "") if m.judge else "",
        direction=m.judge.direction.value if m.judge else "",
        services=[
            wire.ServiceIdentity(name=name, digest=digest)
            for name, digest in (services.service_digests() if services is not None else [])
        ],
    )


def manifest_hash(loaded: LoadedManifest, workflow: str | None = None, provenance: str | None = None) -> str:
    """The manifest text's hash; with an authored workflow, also the compiled workflow's TOML;
    with a `provenance` (what a plugin says the manifest's directory was made from: a domain
    pack's name, version and content digest), also that.

    The compiled TOML is the frozen artifact a run executes, and workflow.star (with what it
    loads) lives beside the manifest rather than in it, so the hash takes in what it compiled to.
    A pack's scripts are not all injects, so a changed pack is told by its digest.
    """
    text = _text_hash(loaded, workflow)
    return text if provenance is None else _h(f"{text}\n{provenance}")


def _text_hash(loaded: LoadedManifest, workflow: str | None) -> str:
    if workflow is not None:
        return _h(f"{loaded.text_hash}\nworkflow={_h(workflow)}")
    from crucible_core.workflow.language import SOURCE_STEM

    if loaded.manifest.workflow is None and not any(loaded.dir.glob(f"{SOURCE_STEM}.*")):
        return loaded.text_hash  # no authored graph: identities stay what they were
    from crucible_core.plugins import load_plugins
    from crucible_core.workflow.pack import artifact_hash, effective_workflow

    # The lanes pass the artifact they froze; only a loop whose authored graph is empty (it runs
    # the built-in one) gets here, and its source is compiled with the installed languages.
    document = effective_workflow(load_plugins(), loaded)
    if document is None:
        return loaded.text_hash
    return _h(f"{loaded.text_hash}\nworkflow={artifact_hash(document)}")
