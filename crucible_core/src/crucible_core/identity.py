"""RunIdentity: the hash-of-hashes that says whether two runs' scores are comparable."""

from __future__ import annotations

import hashlib

from crucible_core.manifest.loader import LoadedManifest

IDENTITY_VERSION = "v1"


def _h(data: bytes | str) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def component_hashes(loaded: LoadedManifest, base_commit: str) -> dict[str, str]:
    m = loaded.manifest
    repo = m.repo.url or m.repo.path or "" if m.repo else ""
    inject = hashlib.sha256()
    for entry in sorted(loaded.injects, key=lambda e: e.destination):
        inject.update(entry.destination.encode() + b"\0")
        inject.update(_h(entry.source.read_bytes()).encode() + b"\n")
    return {
        "repo": _h(repo),
        "base_commit": _h(base_commit),
        "manifest": loaded.text_hash,
        "inject": inject.hexdigest(),
        "measure_cmd": _h((m.judge.measure_cmd or "") if m.judge else ""),
        "direction": _h(m.judge.direction.value if m.judge else "task"),
    }


def run_identity(hashes: dict[str, str]) -> str:
    outer = hashlib.sha256()
    for key in sorted(hashes):
        outer.update(f"{key}={hashes[key]}\n".encode())
    return f"{IDENTITY_VERSION}:{outer.hexdigest()}"
