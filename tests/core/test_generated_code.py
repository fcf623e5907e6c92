"""The cache of the code attrs and cattrs generate: kept between `crucible` processes, used only when
a script's text is the very one kept, and left out of a process that calls main() with arguments."""

from __future__ import annotations

import json
import marshal
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from crucible_core import generated_code
from crucible_core.generated_code import CodeCache
from tests.cli_support import ROOT, crucible_env

COUNTER = ROOT / "examples" / "counter"


def _counter_run(workdir: Path, cache: Path, *, as_command: bool = True) -> dict[str, Any]:
    """The counter to its baseline in a fresh interpreter, as the console script runs it (or as a
    caller of main(arguments)); what the process's cache did."""
    shutil.copytree(COUNTER, workdir, ignore=shutil.ignore_patterns("workspace", "state", "STEER.md"))
    args = ["--manifest", str(workdir / "crucible.toml"), "--iterations", "0", "--no-early-stop"]
    args += ["--ui", "headless"]
    code = textwrap.dedent(
        f"""        import json, sys
        import attr._make, typing
        from crucible_core import generated_code
        from crucible_core.cli.main import main
        sys.argv = ["crucible", *{args!r}]
        try:
            main() if {as_command!r} else main({args!r})
        except SystemExit as exit:
            assert not exit.code, exit.code
        cache = generated_code._installed
        patched = ["compile" in vars(module) for module in (attr._make, typing)]
        found = {{"patched": patched, "installed": cache is not None}}
        if cache is not None:
            found.update(hits=cache.hits, misses=cache.misses)
        print(json.dumps(found), file=sys.stderr)
        """
    )
    env = crucible_env(CRUCIBLE_CACHE_DIR=str(cache))
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = json.loads(done.stderr.strip().splitlines()[-1])
    return found


def _cache_file(cache: Path) -> Path:
    (path,) = cache.glob(f"{generated_code.STEM}-*.marshal")
    return path


def test_a_second_run_compiles_almost_nothing_attrs_and_cattrs_generate(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first = _counter_run(tmp_path / "first", cache)
    assert first["patched"] == [True, True]
    assert first["misses"] > 200  # every record's __init__, the converters' functions
    kept = _cache_file(cache).stat().st_mtime_ns
    _counter_run(tmp_path / "second", cache)  # scripts whose text changed are found out here
    third = _counter_run(tmp_path / "third", cache)
    assert third["hits"] > 200 and third["misses"] < third["hits"] / 4
    assert third["misses"] > 0  # attrs' own hash methods, seeded per process, are compiled every time
    fourth = _counter_run(tmp_path / "fourth", cache)
    assert (fourth["hits"], fourth["misses"]) == (third["hits"], third["misses"])
    assert _cache_file(cache).stat().st_mtime_ns != kept  # the second run wrote what it learned
    settled = _cache_file(cache).stat().st_mtime_ns
    _counter_run(tmp_path / "fifth", cache)
    assert _cache_file(cache).stat().st_mtime_ns == settled  # nothing new: the file is not written


def test_every_kept_code_object_is_what_compile_makes_of_its_text(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    _counter_run(tmp_path / "run", cache)
    _header, kept, _volatile = marshal.loads(_cache_file(cache).read_bytes())
    assert len(kept) > 200
    nameless = 0
    for key, (source, code, _changes) in kept.items():
        flags, mode, filename, *text = key.split("\0", 3)
        assert code == compile(source, filename, mode, int(flags), True), filename
        assert text == ([source] if filename in ("", "<string>") else [])
        nameless += filename == "<string>"
    assert nameless > 30  # typing's string annotations, found by their text


def test_a_caller_of_main_with_arguments_compiles_as_before(tmp_path: Path) -> None:
    found = _counter_run(tmp_path / "embedded", tmp_path / "cache", as_command=False)
    assert found == {"patched": [False, False], "installed": False}
    assert not (tmp_path / "cache").exists() or not list((tmp_path / "cache").glob("generated-code-*"))


def test_a_changed_text_is_compiled_again_and_one_that_keeps_changing_is_no_longer_kept(
    tmp_path: Path,
) -> None:
    path = str(tmp_path / "code.marshal")

    def session(source: str) -> tuple[int, int]:
        cache = CodeCache(path)
        namespace: dict[str, Any] = {}
        exec(cache.compiler(0)(source, "<generated f>", "exec"), namespace)
        assert namespace["f"]() == int(source.rsplit(" ", 1)[-1])
        cache.save()
        return cache.hits, cache.misses

    assert session("def f(): return 1") == (0, 1)
    assert session("def f(): return 1") == (1, 0)
    assert session("def f(): return 2") == (0, 1)  # an upgraded generator: compiled, kept
    assert session("def f(): return 2") == (1, 0)
    assert session("def f(): return 3") == (0, 1)
    assert session("def f(): return 4") == (0, 1)  # changed twice in a row: volatile from now on
    assert session("def f(): return 4") == (0, 1)
    _header, kept, volatile = marshal.loads(Path(path).read_bytes())
    assert kept == {} and volatile == ["0\0exec\0<generated f>"]


def test_an_unreadable_or_foreign_file_is_ignored_and_replaced(tmp_path: Path) -> None:
    path = tmp_path / "code.marshal"
    for junk in (
        b"not marshal at all",
        marshal.dumps(("another interpreter", {}, [])),
        marshal.dumps([1, 2]),
    ):
        path.write_bytes(junk)
        cache = CodeCache(str(path))
        assert eval(cache.compile("6 * 7", "<generated g>", "eval", 0)) == 42
        assert cache.misses == 1
        cache.save()
        again = CodeCache(str(path))
        again.compile("6 * 7", "<generated g>", "eval", 0)
        assert again.hits == 1
    path.write_bytes(
        marshal.dumps((generated_code._HEADER, {"0\0eval\0<generated g>": ("6 * 7", "no code", 0)}, []))
    )
    cache = CodeCache(str(path))
    assert eval(cache.compile("6 * 7", "<generated g>", "eval", 0)) == 42 and cache.misses == 1


def test_a_file_others_could_have_written_is_not_loaded(tmp_path: Path) -> None:
    """The file holds code crucible runs: one that another user may write is not trusted."""
    path = tmp_path / "code.marshal"
    cache = CodeCache(str(path))
    cache.compile("6 * 7", "<generated g>", "eval", 0)
    cache.save()
    path.chmod(0o666)
    loose = CodeCache(str(path))
    loose.compile("6 * 7", "<generated g>", "eval", 0)
    assert (loose.hits, loose.misses) == (0, 1)
    path.chmod(0o600)
    kept = CodeCache(str(path))
    kept.compile("6 * 7", "<generated g>", "eval", 0)
    assert (kept.hits, kept.misses) == (1, 0)


def test_saving_never_writes_through_a_link_planted_at_its_temporary_name(tmp_path: Path) -> None:
    path = tmp_path / "cache" / "code.marshal"
    path.parent.mkdir()
    elsewhere = tmp_path / "elsewhere.txt"
    elsewhere.write_text("untouched\n")
    (path.parent / f"code.marshal.{os.getpid()}.tmp").symlink_to(elsewhere)
    cache = CodeCache(str(path))
    cache.compile("6 * 7", "<generated g>", "eval", 0)
    cache.save()
    assert elsewhere.read_text() == "untouched\n"
    assert CodeCache(str(path))._scripts()  # the file itself was written
    assert path.stat().st_mode & 0o077 == 0
