"""Installed domain packs made runnable: copied into a run directory, versioned, and pointed at a repository.

A pack is a directory a plugin registers through `crucible_register_packs`: a crucible.toml and
the scripts it names, usually inside site-packages. A run never happens there. `--pack NAME`
copies the pack into `./NAME` (its run directory: the copy, then `state/` and the workspace)
and records which pack, at which version and content digest, the copy came from
(`.crucible-pack.json`). A later run with a changed pack refreshes the copied files and says so;
the digest is part of the run identity, so a resume across a pack change warns that scores before
and after it may not be comparable, as for any changed manifest.

`--repo PATH` applies the pack to the user's repository: the copy's manifest names PATH as its
`[repo]`, and the pack's own world (its `[repo]` and `[workspace].setup_cmd`) is set aside. A
pack says what it needs from a repository in its `[pack]` table: files that must exist
(`requires`) and a command that prepares a fresh clone (`setup_cmd`). `check` lists what is
missing; `run` refuses before anything is copied.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import sys
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from crucible_core.api import ManifestError, UsageError, toml_document
from crucible_packs import MARKER

if TYPE_CHECKING:
    from crucible_core.api import Plugins

MANIFEST = "crucible.toml"
# What a pack ships that is not the pack: Python packaging beside the pack's files.
_NOT_SHIPPED = ("__pycache__", "__init__.py")
_NOT_SHIPPED_SUFFIXES = (".pyc", ".pyo")
MAX_PACK_FILES = 10_000


@attrs.frozen
class InstalledPack:
    """A pack as a plugin installed it: where it lives, who shipped it, and what it holds."""

    name: str
    source: Path
    distribution: str
    version: str
    digest: str  # sha256 over every shipped file's path and bytes
    files: tuple[str, ...]  # pack-relative paths, sorted

    @property
    def label(self) -> str:
        return f"{self.name} {self.version} ({self.distribution})"


@attrs.frozen
class PackRun:
    """A run directory prepared for a pack: the manifest to run, and what changed on the way."""

    manifest: Path
    pack: InstalledPack
    refreshed_from: str | None = None  # the version an older copy was made from, when refreshed


def _shipped(root: Path) -> list[str]:
    found: list[str] = []
    for top, dirs, names in os.walk(root):  # never follows a link out of the pack
        dirs[:] = sorted(d for d in dirs if d not in _NOT_SHIPPED)
        for name in sorted(names):
            if name in _NOT_SHIPPED or name.endswith(_NOT_SHIPPED_SUFFIXES):
                continue
            path = Path(top) / name
            if path.is_symlink() or not path.is_file():
                continue
            found.append(path.relative_to(root).as_posix())
            if len(found) > MAX_PACK_FILES:
                raise UsageError(f"the pack at {root} ships more than {MAX_PACK_FILES} files")
    return sorted(found)


def pack_digest(root: Path, files: list[str]) -> str:
    digest = hashlib.sha256()
    for rel in files:
        digest.update(rel.encode("utf-8", "surrogateescape") + b"\0")
        digest.update(hashlib.sha256((root / rel).read_bytes()).digest())
    return digest.hexdigest()


def find_pack(plugins: Plugins, name: str) -> InstalledPack:
    """The installed pack registered as `name`; an unknown name says which are installed."""
    registry = plugins.registry("pack")
    source = Path(registry.get(name, where="--pack"))
    if not (source / MANIFEST).is_file():
        raise UsageError(f"pack {name!r} at {source} has no {MANIFEST}", hint="reinstall the pack")
    distribution = registry.entries[name].plugin
    version = next((i.version for i in plugins.infos if i.distribution == distribution), "unknown")
    files = _shipped(source)
    return InstalledPack(name, source, distribution, version, pack_digest(source, files), tuple(files))


def read_marker(run_dir: Path) -> dict[str, Any] | None:
    """What an existing copy records of its pack, or None (no marker, or not one of ours)."""
    try:
        data = json.loads((run_dir / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("digest"), str) else None


def identity_part(manifest_dir: Path) -> str | None:
    """The pack a run directory was copied from, as the run identity takes it in; None for no pack."""
    marker = read_marker(manifest_dir)
    if marker is None:
        return None
    return f"pack={marker.get('name')} {marker.get('version')} {marker['digest']}"


def _pack_table(text: dict[str, Any]) -> dict[str, Any]:
    table = text.get("pack", {})
    return table if isinstance(table, dict) else {}


def missing_in_repo(pack_manifest: dict[str, Any], repo: Path) -> list[str]:
    """The files the pack's `[pack].requires` names that the repository lacks."""
    requires = _pack_table(pack_manifest).get("requires", [])
    return [rel for rel in requires if isinstance(rel, str) and not (repo / rel).exists()]


def needs_report(plugins: Plugins, pack: InstalledPack, repo: Path | None) -> list[tuple[str, str]]:
    """What the pack needs, as `check` lines ("ok" / "fail" / "info", text): files, setup, params."""
    data = _load_pack_manifest(pack)
    table = _pack_table(data)
    lines: list[tuple[str, str]] = [("info", f"pack {pack.label} from {pack.source}")]
    if table.get("description"):
        lines.append(("info", f"pack: {table['description']}"))
    if repo is None:
        try:
            _check_own_world(pack, data)
        except ManifestError as exc:
            lines.append(("fail", f"{exc.message}; {exc.hint}"))
        return lines + _params_lines(plugins, pack)
    missing = set(missing_in_repo(data, repo))
    for rel in table.get("requires", []):
        if isinstance(rel, str):
            mark = "fail" if rel in missing else "ok"
            lines.append((mark, f"pack needs {rel} in {repo}" + (": missing" if rel in missing else "")))
    setup = table.get("setup_cmd")
    if isinstance(setup, str) and setup.strip():
        lines.append(("info", f"pack prepares the clone of {repo} with: {setup}"))
    return lines + _params_lines(plugins, pack)


def _params_lines(plugins: Plugins, pack: InstalledPack) -> list[tuple[str, str]]:
    from crucible_core.api import find_workflow_source

    source = find_workflow_source(plugins, pack.source)
    if source is None:
        return []
    schema = source.language.params(source.path)
    lines = []
    for name, prop in schema.get("properties", {}).items():
        required = name in schema.get("required", ())
        given = "required: --param " + name + "=VALUE" if required else f"default {prop.get('default')!r}"
        about = f" ({prop['description']})" if prop.get("description") else ""
        lines.append(("info", f"pack param {name}: {prop.get('type', 'any')}, {given}{about}"))
    return lines


def _load_pack_manifest(pack: InstalledPack) -> dict[str, Any]:
    try:
        return tomllib.loads((pack.source / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ManifestError(
            f"pack {pack.name}'s {MANIFEST} cannot be read: {exc}", hint="reinstall the pack"
        ) from None


def applied_manifest(pack: InstalledPack, data: dict[str, Any], repo: Path) -> str:
    """The pack's manifest pointed at `repo`: its own world set aside, its `[pack]` needs applied."""
    document = {key: value for key, value in data.items() if key != "repo"}
    workspace = dict(document.get("workspace", {}))
    workspace.pop("setup_cmd", None)  # it built the pack's own world
    setup = _pack_table(data).get("setup_cmd")
    if isinstance(setup, str) and setup.strip():
        # a setup_cmd takes the clone's place, so it clones first, then prepares the clone
        target = workspace.get("dir", "workspace")
        workspace["setup_cmd"] = (
            f"git clone --quiet -- {shlex.quote(str(repo))} {shlex.quote(str(target))} "
            f"&& cd {shlex.quote(str(target))} && {setup}"
        )
    if workspace:
        document["workspace"] = workspace
    header = (
        f"# generated by `crucible --pack {pack.name} --repo {repo}` from {pack.label};\n"
        "# edit the pack, not this file: the next run writes it again\n"
    )
    return header + toml_document({"repo": {"path": str(repo)}, **document})


def _check_own_world(pack: InstalledPack, data: dict[str, Any]) -> None:
    repo = data.get("repo")
    workspace = data.get("workspace")
    setup = workspace.get("setup_cmd") if isinstance(workspace, dict) else None
    if isinstance(repo, dict) and repo.get("path") == "." and not setup:
        raise ManifestError(
            f'pack {pack.name} names its own directory as [repo] path = "." and has no '
            "[workspace] setup_cmd, so there is nothing to clone",
            hint=f"run it against your repository: crucible run --pack {pack.name} --repo PATH "
            "(or the pack builds its world with a [workspace] setup_cmd)",
        )


def prepare(plugins: Plugins, name: str, repo: Path | None, base: Path | None = None) -> PackRun:
    """Copy pack `name` into `<base>/<name>` (or refresh an older copy) and return its manifest.

    A directory of that name that no pack copy made is left alone and refused. With `repo`, the
    repository must hold what the pack requires, and the copy's manifest names it.
    """
    pack = find_pack(plugins, name)
    data = _load_pack_manifest(pack)
    if repo is not None:
        repo = repo.expanduser().resolve()
        if not repo.is_dir():
            raise UsageError(f"--repo {repo} is not a directory", hint="pass the path of a git repository")
        missing = missing_in_repo(data, repo)
        if missing:
            raise ManifestError(
                f"pack {name} needs {', '.join(missing)} in {repo}, which it lacks",
                hint=f"`crucible check --pack {name} --repo {repo}` lists what the pack needs",
            )
    else:
        _check_own_world(pack, data)
    run_dir = (base or Path.cwd()) / name
    marker = read_marker(run_dir)
    if run_dir.exists() and marker is None:
        raise UsageError(
            f"./{name} exists and was not made by `--pack {name}`",
            hint=f"move ./{name} away so the pack can be copied there",
        )
    wanted: dict[str, str | None] = {"name": pack.name, "distribution": pack.distribution}
    wanted |= {"version": pack.version, "digest": pack.digest, "repo": str(repo) if repo else None}
    if marker is not None and all(marker.get(k) == v for k, v in wanted.items()):
        return PackRun(run_dir / MANIFEST, pack)
    _copy(pack, run_dir, [] if marker is None else marker.get("files", []))
    if repo is not None:
        (run_dir / MANIFEST).write_text(applied_manifest(pack, data, repo), encoding="utf-8")
    record = {**wanted, "files": list(pack.files)}
    temp = run_dir / f"{MARKER}.tmp"
    temp.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    os.replace(temp, run_dir / MARKER)
    refreshed = None
    if marker is not None and marker.get("digest") != pack.digest:
        refreshed = str(marker.get("version"))
        print(
            f"crucible: pack {name} changed since ./{name} was copied ({refreshed} -> {pack.version}): "
            "its files are refreshed, and the run identity is not the earlier run's (a resume says so)",
            file=sys.stderr,
        )
    return PackRun(run_dir / MANIFEST, pack, refreshed)


def _copy(pack: InstalledPack, run_dir: Path, old_files: Any) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    shipped = set(pack.files)
    for rel in old_files if isinstance(old_files, list) else []:
        # a file the older pack shipped and this one does not; the run's own files are not listed
        if isinstance(rel, str) and rel not in shipped and ".." not in Path(rel).parts:
            (run_dir / rel).unlink(missing_ok=True)
    for rel in pack.files:
        target = run_dir / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.is_symlink():
            target.unlink()
        shutil.copy2(pack.source / rel, target)


def existing_manifest(name: str, base: Path | None = None) -> Path:
    """The manifest of an earlier `--pack NAME` copy (for show, results, status): never copies."""
    run_dir = (base or Path.cwd()) / name
    if read_marker(run_dir) is None:
        raise UsageError(
            f"no copy of pack {name} in ./{name}", hint=f"`crucible run --pack {name}` makes one"
        )
    return run_dir / MANIFEST


class InstalledPacks:
    """The handler of `--pack NAME` core asks through crucible_domain_packs (a DomainPacks)."""

    def prepare(self, plugins: Plugins, name: str, repo: Path | None, base: Path | None = None) -> Path:
        return prepare(plugins, name, repo, base).manifest

    def existing_manifest(self, name: str) -> Path:
        return existing_manifest(name)

    def needs(self, plugins: Plugins, name: str, repo: Path | None) -> list[tuple[str, str]]:
        return needs_report(plugins, find_pack(plugins, name), repo.resolve() if repo else None)

    def provenance(self, manifest_dir: Path) -> str | None:
        return identity_part(manifest_dir)
