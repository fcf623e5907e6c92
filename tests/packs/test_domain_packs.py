"""Domain packs a plugin installs, applied to the user's repository: `--pack NAME --repo PATH`.

The pack is a real distribution on a real import path (a dist-info with its entry point, as pip
would leave it), and every command runs as the installed console script, because the plugin is
found through PYTHONPATH by a fresh interpreter.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.cli_support import crucible_env
from tests.fresh_interpreter import json_printed_by

CRUCIBLE = Path(sys.executable).parent / "crucible"

PACK_MANIFEST = """\
# The notes pack: add lines to your notes.txt. Applied to a repository with --repo.
[repo]
path = "."

[workspace]
setup_cmd = "mkdir -p workspace && cp notes.txt workspace/"
inject = ["count.sh"]

[agent]
backend = "command"
agent_cmd = "echo more >> notes.txt"
goal = "Add lines to notes.txt."

[judge]
measure_cmd = "./count.sh"
direction = "higher"

[pack]
description = "more lines in notes.txt"
requires = ["notes.txt"]
setup_cmd = "touch prepared.flag"
"""

COUNT = """\
#!/bin/sh
echo "{\\"valid\\": true, \\"score\\": $(wc -l < notes.txt)}"
"""


def install_pack(site: Path, version: str, count: str = COUNT) -> None:
    """The pack as pip leaves a distribution: its package and a dist-info naming the entry point."""
    package = site / "crucible_pack_notes"
    (package / "pack").mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text(
        "from pathlib import Path\n"
        "from crucible_core.hookspecs import hookimpl\n\n"
        "@hookimpl\n"
        "def crucible_register_packs(register):\n"
        "    register('notes', Path(__file__).resolve().parent / 'pack')\n"
    )
    (package / "pack" / "crucible.toml").write_text(PACK_MANIFEST)
    (package / "pack" / "notes.txt").write_text("one\n")
    (package / "pack" / "count.sh").write_text(count)
    (package / "pack" / "count.sh").chmod(0o755)
    for old in site.glob("crucible_pack_notes-*.dist-info"):
        for f in old.iterdir():
            f.unlink()
        old.rmdir()
    info = site / f"crucible_pack_notes-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: crucible-pack-notes\nVersion: {version}\n")
    (info / "entry_points.txt").write_text("[crucible]\nnotes = crucible_pack_notes\n")


def user_repo(path: Path, with_notes: bool = True) -> Path:
    path.mkdir()
    (path / "README").write_text("my project\n")
    if with_notes:
        (path / "notes.txt").write_text("a\nb\n")
    for argv in (
        ["init", "-q"],
        ["add", "-A"],
        ["-c", "user.name=u", "-c", "user.email=u@x", "commit", "-qm", "s"],
    ):
        subprocess.run(["git", *argv], cwd=path, check=True)
    return path


def crucible(cwd: Path, site: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(CRUCIBLE), *map(str, args)],
        cwd=cwd,
        env=crucible_env(PYTHONPATH=str(site)),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_pack_runs_against_your_repository_and_check_says_what_it_lacks(tmp_path: Path) -> None:
    site, work = tmp_path / "site", tmp_path / "work"
    install_pack(site, "1.0")
    work.mkdir()
    bare = user_repo(tmp_path / "bare", with_notes=False)
    # the repository lacks what the pack requires: check names it, run refuses before copying
    checked = crucible(work, site, "check", "--pack", "notes", "--repo", bare)
    assert checked.returncode == 13, checked.stdout + checked.stderr
    assert f"FAIL pack needs notes.txt in {bare}: missing" in checked.stdout
    assert "pack prepares the clone" in checked.stdout and "touch prepared.flag" in checked.stdout
    refused = crucible(work, site, "run", "--pack", "notes", "--repo", bare, "--iterations", "1")
    assert refused.returncode == 10 and "needs notes.txt" in refused.stderr
    assert not (work / "notes").exists()

    repo = user_repo(tmp_path / "mine")
    ok = crucible(work, site, "check", "--pack", "notes", "--repo", repo)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert f"ok   pack needs notes.txt in {repo}" in ok.stdout
    done = crucible(
        work, site, "run", "--pack", "notes", "--repo", repo, "--iterations", "2", "--ui", "headless"
    )
    assert done.returncode == 0, done.stderr
    workspace = work / "notes" / "workspace"
    # the workspace is your repository (its README, its notes), prepared by the pack's setup_cmd
    assert (workspace / "README").read_text() == "my project\n"
    assert (workspace / "prepared.flag").exists()
    assert (workspace / "notes.txt").read_text().splitlines() == ["a", "b", "more", "more"]
    assert (repo / "notes.txt").read_text() == "a\nb\n"  # your checkout is only read
    shown = crucible(work, site, "show", "--pack", "notes", "--json")
    view = json.loads(shown.stdout)
    assert [r["score"] for r in view["rows"] if r["decision"] == "keep"] == [3, 4]
    assert view["baseline_score"] == 2


def test_a_changed_pack_is_refreshed_and_a_resume_across_it_is_told_the_identity_changed(
    tmp_path: Path,
) -> None:
    site, work = tmp_path / "site", tmp_path / "work"
    install_pack(site, "1.0")
    work.mkdir()
    repo = user_repo(tmp_path / "mine")
    first = crucible(
        work, site, "run", "--pack", "notes", "--repo", repo, "--iterations", "1", "--ui", "headless"
    )
    assert first.returncode == 0, first.stderr
    marker = json.loads((work / "notes" / ".crucible-pack.json").read_text())
    assert marker["version"] == "1.0" and marker["repo"] == str(repo.resolve())
    # a reinstall with a different judge: the copy is refreshed and said so, and the resume is
    # told its identity changed (the pack's digest is part of it, as the manifest's text is)
    install_pack(site, "2.0", count=COUNT.replace("wc -l", "grep -c more"))
    resumed = crucible(work, site, "run", "--pack", "notes", "--repo", repo, "--resume", "--iterations", "2")
    assert "pack notes changed since ./notes was copied (1.0 -> 2.0)" in resumed.stderr
    assert resumed.returncode == 0, resumed.stderr
    assert "RUN IDENTITY CHANGED since the run started (manifest_hash" in resumed.stderr
    assert "grep -c more" in (work / "notes" / "count.sh").read_text()
    assert json.loads((work / "notes" / ".crucible-pack.json").read_text())["version"] == "2.0"


def test_a_pack_of_its_own_world_with_nothing_to_clone_is_refused_by_name(tmp_path: Path) -> None:
    site, work = tmp_path / "site", tmp_path / "work"
    install_pack(site, "1.0")
    toml = site / "crucible_pack_notes" / "pack" / "crucible.toml"
    toml.write_text(
        PACK_MANIFEST.replace('setup_cmd = "mkdir -p workspace && cp notes.txt workspace/"\n', "")
    )
    work.mkdir()
    done = crucible(work, site, "run", "--pack", "notes", "--iterations", "1")
    assert done.returncode == 10
    assert 'path = "."' in done.stderr and "--repo PATH" in done.stderr
    assert not (work / "notes").exists()
    # a directory of that name that no pack copy made is never overwritten
    (work / "notes").mkdir()
    (work / "notes" / "mine.txt").write_text("keep me")
    again = crucible(work, site, "init", "--pack", "notes", "--repo", user_repo(tmp_path / "r"))
    assert again.returncode == 64 and "was not made by `--pack notes`" in again.stderr
    assert (work / "notes" / "mine.txt").read_text() == "keep me"


def test_init_copies_a_pack_pointed_at_a_repository_and_says_what_next(tmp_path: Path) -> None:
    site, work = tmp_path / "site", tmp_path / "work"
    install_pack(site, "1.0")
    work.mkdir()
    repo = user_repo(tmp_path / "mine")
    done = crucible(work, site, "init", "--pack", "notes", "--repo", repo)
    assert done.returncode == 0, done.stderr
    assert "copied pack notes 1.0 (crucible-pack-notes)" in done.stdout
    assert f"crucible run --pack notes --repo {repo}" in done.stdout
    import tomllib

    manifest = tomllib.loads((work / "notes" / "crucible.toml").read_text())
    assert manifest["repo"] == {"path": str(repo.resolve())}
    assert manifest["workspace"]["setup_cmd"].endswith("&& touch prepared.flag")
    assert manifest["judge"] == {"measure_cmd": "./count.sh", "direction": "higher"}


def test_the_pack_a_copy_came_from_is_part_of_the_run_identity(tmp_path: Path) -> None:
    from crucible_core.manifest.loader import load_manifest
    from crucible_core.run.identity import manifest_hash
    from crucible_packs.domain_pack import MARKER, identity_part

    # a pack's own scripts need not be injects, so the manifest's text alone would not notice them
    (tmp_path / "crucible.toml").write_text(
        '[repo]\npath = "."\n[judge]\nmeasure_cmd = "./m.sh"\ndirection = "higher"\n'
    )
    (tmp_path / "m.sh").write_text("#!/bin/sh\necho '{}'\n")
    (tmp_path / "m.sh").chmod(0o755)
    plain = manifest_hash(load_manifest(tmp_path / "crucible.toml"), provenance=identity_part(tmp_path))
    hashes = []
    for digest in ("a" * 64, "b" * 64):
        (tmp_path / MARKER).write_text(json.dumps({"name": "notes", "version": "1", "digest": digest}))
        provenance = identity_part(tmp_path)
        hashes.append(manifest_hash(load_manifest(tmp_path / "crucible.toml"), provenance=provenance))
    assert len({plain, *hashes}) == 3


def test_the_packs_core_asks_at_every_start_name_a_copy_as_its_marker_does(tmp_path: Path) -> None:
    """What core gets from crucible_domain_packs says the same provenance as the marker's reader,
    and loads the pack module only when a marker is there (a fresh interpreter counts)."""
    code = f"""if True:
        import json, sys
        from pathlib import Path
        import crucible_packs
        packs = crucible_packs.crucible_domain_packs()
        root = Path({str(tmp_path)!r})
        found = [packs.provenance(root), "crucible_packs.domain_pack" in sys.modules]
        (root / crucible_packs.MARKER).write_text(json.dumps({{"name": "notes", "version": "1", "digest": "c" * 64}}))
        found += [packs.provenance(root), "crucible_packs.domain_pack" in sys.modules]
        (root / crucible_packs.MARKER).write_text("torn")
        found.append(packs.provenance(root))
        print(json.dumps(found))
        """
    assert json_printed_by(code) == [None, False, "pack=notes 1 " + "c" * 64, True, None]


def test_without_the_packs_plugin_a_pack_is_refused_naming_it(tmp_path: Path) -> None:
    site, work = tmp_path / "site", tmp_path / "work"
    install_pack(site, "1.0")
    work.mkdir()
    env = crucible_env(PYTHONPATH=str(site), CRUCIBLE_LOAD_PLUGINS="core,world_git,judge_command,notes")
    # check and run refuse the pack (exit 12); init itself is the plugin's command (a usage error)
    for command, code in (("check", 12), ("run", 12), ("init", 64)):
        done = subprocess.run(
            [str(CRUCIBLE), command, "--pack", "notes"], cwd=work, env=env, capture_output=True, text=True
        )
        assert done.returncode == code, done.stdout + done.stderr
        assert "pip install crucible-plugin-packs" in done.stderr
    assert not (work / "notes").exists()
