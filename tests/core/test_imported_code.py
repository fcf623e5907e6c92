"""The imported-code cache: a later `crucible` process imports the modules from it, an edited
module is imported afresh, and a planted or damaged cache file is never trusted or waited on.

Each test starts fresh interpreters (the cache is between processes) that install the finder as
the console script does and import a small package of the test's own, kept in a directory whose
times are set well in the past (a module changed shortly before a process starts is not kept).
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from crucible_core import imported_code, plugin_index
from tests.cli_support import crucible_env

DRIVER = textwrap.dedent(
    """
    import sys
    from crucible_core import imported_code
    cache = imported_code.install()
    import json
    import tiny.deep
    found = {
        "value": tiny.deep.VALUE,
        "loaders": [type(m.__spec__.loader).__name__ for m in (sys.modules["tiny"], tiny.deep)],
        "file": tiny.deep.__file__,
        "source": tiny.deep.__loader__.get_source("tiny.deep"),
        "served": sorted(cache.served),
    }
    print(json.dumps(found))
    """
)


def _settle(*paths: Path) -> None:
    """Move the modification times of `paths` well before now: as an installed package's are."""
    past = time.time() - 60
    for path in paths:
        os.utime(path, (past, past))


def _tiny(root: Path, value: int) -> Path:
    """A package `tiny` with a module `tiny.deep` whose VALUE is `value`, all settled, under `root`."""
    package = root / "tiny"
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text("")
    (package / "deep.py").write_text(f"VALUE = {value}\n")
    (root / "driver.py").write_text(DRIVER)
    _settle(package / "__init__.py", package / "deep.py", root / "driver.py", package, root)
    return package


def _run_driver(root: Path, cache: Path, script: str, **extra: str) -> dict[str, Any]:
    """A fresh interpreter running `root/script` with the cache at `cache`; the JSON it printed."""
    # No `__pycache__` written into the package: that would change its directory after the first start.
    env = crucible_env(CRUCIBLE_CACHE_DIR=str(cache), PYTHONDONTWRITEBYTECODE="1", **extra)
    done = subprocess.run(
        [sys.executable, str(root / script)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
        cwd=root,
    )
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = json.loads(done.stdout)
    return found


def _start(root: Path, cache: Path) -> dict[str, Any]:
    """A fresh interpreter importing `tiny.deep` through the cache; what it found."""
    return _run_driver(root, cache, "driver.py")


def _cache_file(cache: Path) -> Path:
    (path,) = cache.glob(f"{imported_code.STEM}-*.marshal")
    return path


def test_a_second_start_imports_the_modules_from_the_cache(tmp_path: Path) -> None:
    root, cache = tmp_path / "code", tmp_path / "cache"
    package = _tiny(root, 1)
    first = _start(root, cache)
    assert first["loaders"] == ["SourceFileLoader", "SourceFileLoader"]
    written = _cache_file(cache).stat()
    assert stat.S_IMODE(written.st_mode) == 0o600
    second = _start(root, cache)
    assert second["loaders"] == ["CachedModuleLoader", "CachedModuleLoader"]
    assert {"tiny", "tiny.deep", "json"} <= set(second["served"])  # the standard library's too
    # What a module exposes is the standard loader's: its file and its source.
    assert second["value"] == 1 and second["file"] == str(package / "deep.py")
    assert second["source"] == "VALUE = 1\n"
    # Nothing new was imported: the file is not written again.
    assert _cache_file(cache).stat().st_mtime_ns == written.st_mtime_ns


def test_an_edited_module_is_imported_afresh_and_the_cache_rewritten(tmp_path: Path) -> None:
    root, cache = tmp_path / "code", tmp_path / "cache"
    package = _tiny(root, 1)
    _start(root, cache)
    assert _start(root, cache)["loaders"][1] == "CachedModuleLoader"
    # The same size, only the modification time tells the edit apart.
    (package / "deep.py").write_text("VALUE = 2\n")
    edited = time.time() - 30
    os.utime(package / "deep.py", (edited, edited))
    third = _start(root, cache)
    assert third["value"] == 2 and third["loaders"] == ["CachedModuleLoader", "SourceFileLoader"]
    fourth = _start(root, cache)  # the file now holds the edited module
    assert fourth["value"] == 2 and fourth["loaders"] == ["CachedModuleLoader", "CachedModuleLoader"]


def test_a_module_added_along_the_path_is_found_not_the_cached_one(tmp_path: Path) -> None:
    """A module the cache holds, shadowed by a new one earlier on the import path (a directory
    changed along the way): the new one is imported, as Python would."""
    root, cache = tmp_path / "code", tmp_path / "cache"
    package = _tiny(root, 1)
    _start(root, cache)
    assert _start(root, cache)["loaders"][1] == "CachedModuleLoader"
    # An extension module's name beats a source module's in the same directory: here a package
    # `deep/` beside `deep.py` does, which changes the directory the module was found in.
    (package / "deep").mkdir()
    (package / "deep" / "__init__.py").write_text("VALUE = 3\n")
    found = _start(root, cache)
    assert found["value"] == 3 and found["file"] == str(package / "deep" / "__init__.py")


def test_a_changed_import_path_misses(tmp_path: Path) -> None:
    """The same module found through another import path is not served from the cache."""
    root, cache = tmp_path / "code", tmp_path / "cache"
    _tiny(root, 1)
    _start(root, cache)
    other = tmp_path / "other"
    _tiny(other, 5)
    # The driver's own directory first on the path: `tiny` is now the other one.
    assert _start(other, cache)["value"] == 5


@pytest.mark.parametrize("planted", ["fifo", "link"])
def test_a_fifo_or_link_at_the_cache_path_is_neither_waited_on_nor_followed(
    tmp_path: Path, planted: str
) -> None:
    root, cache = tmp_path / "code", tmp_path / "cache"
    _tiny(root, 1)
    _start(root, cache)
    _start(root, cache)
    path = _cache_file(cache)
    elsewhere = tmp_path / "elsewhere.marshal"
    path.rename(elsewhere)  # a good cache file, reachable only through the link
    if planted == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to(elsewhere)
    kept = elsewhere.read_bytes()
    found = _start(root, cache)  # within the timeout: a FIFO is not opened for reading and waited on
    assert found["value"] == 1 and found["loaders"] == ["SourceFileLoader", "SourceFileLoader"]
    # Written again at exit: as a regular file in place of the FIFO or the link, the target untouched.
    assert stat.S_ISREG(path.lstat().st_mode)
    assert elsewhere.read_bytes() == kept


@pytest.mark.parametrize("damage", ["truncated", "garbage", "code cut short"])
def test_a_damaged_cache_is_ignored_and_replaced(tmp_path: Path, damage: str) -> None:
    root, cache = tmp_path / "code", tmp_path / "cache"
    _tiny(root, 1)
    _start(root, cache)
    path = _cache_file(cache)
    data = path.read_bytes()
    index_length = int.from_bytes(data[:8], "little")
    if damage == "truncated":
        path.write_bytes(data[: 8 + index_length // 2])
    elif damage == "garbage":
        path.write_bytes(os.urandom(len(data)))
    else:  # the index intact, every module's code cut off after its first bytes
        path.write_bytes(data[: 8 + index_length + 16])
    path.chmod(0o600)
    found = _start(root, cache)
    assert found["value"] == 1 and found["source"] == "VALUE = 1\n"
    # No code from the file: a file not read at all, or (its index intact) code that failed to load
    assert damage == "code cut short" or found["loaders"][1] == "SourceFileLoader"
    assert "tiny.deep" not in found["served"]
    assert _start(root, cache)["loaders"] == ["CachedModuleLoader", "CachedModuleLoader"]


def test_a_cache_file_others_may_write_is_not_used(tmp_path: Path) -> None:
    root, cache = tmp_path / "code", tmp_path / "cache"
    _tiny(root, 1)
    _start(root, cache)
    _cache_file(cache).chmod(0o666)
    assert _start(root, cache)["loaders"] == ["SourceFileLoader", "SourceFileLoader"]


def test_the_cache_file_is_the_interpreters_own_in_the_cache_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """imported_code names its file without importing plugin_index: the same name all the same."""
    monkeypatch.setenv("CRUCIBLE_CACHE_DIR", str(tmp_path))
    assert imported_code.cache_path() == plugin_index.cache_file(imported_code.STEM, ".marshal")
    monkeypatch.delenv("CRUCIBLE_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert imported_code.cache_path() == plugin_index.cache_file(imported_code.STEM, ".marshal")


def test_a_module_found_through_the_working_directory_is_not_kept(tmp_path: Path) -> None:
    """`python -c` puts "" (the working directory) first on the path: what it finds there
    depends on where the next process starts, so it is never served from the cache."""
    cache = tmp_path / "cache"
    env = crucible_env(CRUCIBLE_CACHE_DIR=str(cache), PYTHONDONTWRITEBYTECODE="1")
    values = []
    for value, name in ((1, "one"), (1, "one"), (2, "two")):
        _tiny(tmp_path / name, value)
        done = subprocess.run(
            [sys.executable, "-c", DRIVER],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            check=True,
            cwd=tmp_path / name,
        )
        values.append(json.loads(done.stdout))
    assert [found["value"] for found in values] == [1, 1, 2]
    assert "tiny.deep" not in values[1]["served"]


ABSENT_DRIVER = textwrap.dedent(
    """
    import os, sys
    from crucible_core import imported_code
    cache = imported_code.install()
    import importlib.abc, importlib.util, json
    import tiny

    class Provides(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        # a finder a program appended after Python's own: it has `tiny.missing`
        def find_spec(self, name, path=None, target=None):
            return importlib.util.spec_from_loader(name, self) if name == "tiny.missing" else None
        def create_module(self, spec):
            return None
        def exec_module(self, module):
            module.VALUE = "appended"

    if os.environ.get("APPEND_FINDER"):
        sys.meta_path.append(Provides())
    try:
        import tiny.missing
        found = tiny.missing.VALUE
    except ModuleNotFoundError as error:
        found = [str(error), error.name]
    print(json.dumps({
        "found": found,
        "absent": sorted(cache.absent_served),
        "spec": repr(importlib.util.find_spec("tiny.missing")),
    }))
    """
)


def _absent_start(root: Path, cache: Path, **extra: str) -> dict[str, Any]:
    (root / "absent.py").write_text(ABSENT_DRIVER)
    _settle(root / "absent.py", root)
    return _run_driver(root, cache, "absent.py", **extra)


def test_a_module_found_nowhere_is_known_absent_until_its_directory_changes(tmp_path: Path) -> None:
    """A failed import walks every entry of its path; the second start answers it from the file,
    with the error Python raises, and importlib.util.find_spec still answers None."""
    root, cache = tmp_path / "code", tmp_path / "cache"
    package = _tiny(root, 1)
    missing = ["No module named 'tiny.missing'", "tiny.missing"]
    first = _absent_start(root, cache)
    assert first["found"] == missing and first["absent"] == []
    second = _absent_start(root, cache)
    assert second["found"] == missing and second["absent"] == ["tiny.missing"]
    assert second["spec"] == "None"
    # A finder appended after Python's own might find it: the file's answer is not used.
    appended = _absent_start(root, cache, APPEND_FINDER="1")
    assert appended["found"] == "appended" and appended["absent"] == []
    # The module written later: its directory changed, so it is looked for, and found.
    (package / "missing.py").write_text("VALUE = 'written later'\n")
    later = _absent_start(root, cache)
    assert later["found"] == "written later" and later["absent"] == []


PICK_DRIVER = textwrap.dedent(
    """
    import importlib, json, os, sys
    from crucible_core import imported_code
    cache = imported_code.install()
    found = {}
    for name in os.environ["IMPORT"].split():
        module = importlib.import_module(name)
        found[name] = [getattr(module, "VALUE", None), type(module.__spec__.loader).__name__]
    print(json.dumps(found))
    """
)


def _pick(root: Path, cache: Path, *names: str) -> dict[str, Any]:
    """A fresh interpreter importing `names` (in order) through the cache: each one's VALUE and loader."""
    (root / "pick.py").write_text(PICK_DRIVER)
    _settle(root / "pick.py", root)
    return _run_driver(root, cache, "pick.py", IMPORT=" ".join(names))


def test_a_kept_module_not_imported_again_is_not_revalidated_by_a_rewrite(tmp_path: Path) -> None:
    """A directory changed since the file was written: the modules found along it that this
    process imported are kept afresh, but one it did not import keeps the directory's old time,
    so the next process looks for it again rather than serving what may now be shadowed."""
    root, cache = tmp_path / "code", tmp_path / "cache"
    package = _tiny(root, 1)
    (package / "other.py").write_text("VALUE = 'module'\n")
    _settle(package / "other.py", package)
    _pick(root, cache, "tiny.deep", "tiny.other")
    assert _pick(root, cache, "tiny.other")["tiny.other"] == ["module", "CachedModuleLoader"]
    # A package `other/` now beats `other.py` in the same directory (which that changed).
    (package / "other").mkdir()
    (package / "other" / "__init__.py").write_text("VALUE = 'package'\n")
    _settle(package / "other" / "__init__.py", package / "other", package)
    # This process imports only `tiny.deep` (looked for in the changed directory): the file is
    # written again with the directory's new time.
    assert _pick(root, cache, "tiny.deep")["tiny.deep"] == [1, "SourceFileLoader"]
    assert _pick(root, cache, "tiny.other")["tiny.other"] == ["package", "SourceFileLoader"]


def test_an_init_added_to_a_directory_beside_a_kept_module_is_imported(tmp_path: Path) -> None:
    """A directory of the module's name without `__init__` (as a package turned module leaves
    behind with its `__pycache__`) loses to the module; given an `__init__` it wins, and only its
    own time changes, not that of the directory the module was found in."""
    root, cache = tmp_path / "code", tmp_path / "cache"
    package = _tiny(root, 1)
    (package / "other.py").write_text("VALUE = 'module'\n")
    (package / "other" / "__pycache__").mkdir(parents=True)
    _settle(package / "other.py", package / "other" / "__pycache__", package / "other", package)
    assert _pick(root, cache, "tiny.other")["tiny.other"] == ["module", "SourceFileLoader"]
    assert _pick(root, cache, "tiny.other")["tiny.other"][0] == "module"
    (package / "other" / "__init__.py").write_text("VALUE = 'package'\n")
    _settle(package / "other" / "__init__.py", package / "other")
    assert _pick(root, cache, "tiny.other")["tiny.other"] == ["package", "SourceFileLoader"]


RACE_DRIVER = textwrap.dedent(
    """
    import os, sys
    from crucible_core import imported_code
    cache = imported_code.install()
    import tiny.deep
    package = os.path.dirname(tiny.__file__)
    kept = cache._new_entry

    def then_shadowed(name):
        made = kept(name)
        if name == "tiny.deep":  # another process makes `deep/` a package right after the look
            os.mkdir(os.path.join(package, "deep"))
            with open(os.path.join(package, "deep", "__init__.py"), "w") as f:
                f.write("VALUE = 'package'\\n")
        return made

    cache._new_entry = then_shadowed
    """
)


def test_a_directory_changed_while_the_file_is_written_does_not_vouch_for_its_modules(tmp_path: Path) -> None:
    """The directories' times the file records are taken as it is written, after each module
    was looked at: one that changed in between (not settled) must not vouch for the module."""
    root, cache = tmp_path / "code", tmp_path / "cache"
    package = _tiny(root, 1)
    (root / "race.py").write_text(RACE_DRIVER)
    _settle(root / "race.py", root)
    env = crucible_env(CRUCIBLE_CACHE_DIR=str(cache), PYTHONDONTWRITEBYTECODE="1")
    subprocess.run([sys.executable, str(root / "race.py")], env=env, timeout=60, check=True)
    # Settled since (well before the next start), and the directory time is what the file saw.
    _settle(package / "deep" / "__init__.py", package / "deep")
    assert _pick(root, cache, "tiny.deep")["tiny.deep"] == ["package", "SourceFileLoader"]
