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
from types import CodeType
from typing import Any

from crucible_core import generated_code
from crucible_core.generated_code import VOLATILE_AFTER, VOLATILE_FOR_GOOD, CodeCache
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
    second = _counter_run(tmp_path / "second", cache)
    # everything, attrs' hash methods too though each process seeds them anew (they were compiled
    # by every run until issue 27's seventh round)
    assert second["hits"] > 200 and second["misses"] == 0
    third = _counter_run(tmp_path / "third", cache)
    assert (third["hits"], third["misses"]) == (second["hits"], second["misses"])
    assert _cache_file(cache).stat().st_mtime_ns == kept  # nothing new: the file is not written again


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
    assert session("def f(): return 4") == (0, 1)  # changed twice in a row: volatile, not kept
    _header, kept, volatile = marshal.loads(Path(path).read_bytes())
    assert kept == {} and [entry[0] for entry in volatile] == ["0\0exec\0<generated f>"]
    # The same text in the next process: it settled (two upgrades with one run between them), so
    # it is kept again rather than compiled by every process from now on.
    assert session("def f(): return 4") == (0, 1)
    assert session("def f(): return 4") == (1, 0)
    _header, kept, volatile = marshal.loads(Path(path).read_bytes())
    assert list(kept) == ["0\0exec\0<generated f>"] and volatile == []


def test_a_script_that_changes_in_every_process_is_given_up_on_and_stops_the_file_being_written(
    tmp_path: Path,
) -> None:
    path = tmp_path / "code.marshal"

    def session(n: int) -> None:
        cache = CodeCache(str(path))
        cache.compiler(0)(f"def f(): return {n}", "<generated f>", "exec")
        cache.save()

    for n in range(VOLATILE_AFTER + VOLATILE_FOR_GOOD + 1):
        session(n)
    _header, kept, volatile = marshal.loads(path.read_bytes())
    assert kept == {} and volatile == [
        ("0\0exec\0<generated f>", generated_code._checksum(f"def f(): return {n}"), VOLATILE_FOR_GOOD)
    ]
    written = path.stat().st_mtime_ns, path.stat().st_ino
    session(1000)
    assert (path.stat().st_mtime_ns, path.stat().st_ino) == written  # nothing new to write


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


def _without_columns(code: CodeType) -> CodeType:
    """The code without its position table (the seed's column differs with its width), in it and
    in the functions it defines: the instructions, constants and names are what is compared."""
    consts = tuple(_without_columns(c) if isinstance(c, CodeType) else c for c in code.co_consts)
    return code.replace(co_linetable=b"", co_consts=consts)


def test_an_attrs_hash_method_seeded_anew_by_each_process_is_compiled_once(tmp_path: Path) -> None:
    """attrs writes a per-process number into each __hash__ it generates; the cache keeps the
    script with that number taken out and gives back exactly what compile makes of each text."""
    cache = CodeCache(str(tmp_path / "cache.marshal"))

    def script(seed: int) -> str:
        return f"def __hash__(self):\n        return hash((\n        {seed},\n        self.a,\n        self.b,\n    ))"

    for seed in (1234567890123, -987654321, 5):
        code = cache.compile(script(seed), "<attrs generated methods m.C>", "exec", 0)
        made = compile(script(seed), "<attrs generated methods m.C>", "exec", 0, True)
        assert _without_columns(code) == _without_columns(made)
        names: dict[str, Any] = {}
        exec(code, names)
        holder = type("Holder", (), {"a": 1, "b": "x", "__hash__": names["__hash__"]})
        assert hash(holder()) == hash((seed, 1, "x"))
    assert (cache.hits, cache.misses) == (2, 1)
    two = "def f():\n    return hash((\n        1,\n    )) + hash((\n        2,\n    ))"
    assert cache.compile(two, "<two>", "exec", 0) == compile(two, "<two>", "exec", 0, True)  # left as it is


def test_a_fifo_or_link_at_the_cache_files_is_neither_waited_on_nor_followed(tmp_path: Path) -> None:
    import threading

    from crucible_core.plugin_index import read_cache

    fifo = tmp_path / "planted.fifo"
    os.mkfifo(fifo)
    good = tmp_path / "good.marshal"
    cache = CodeCache(str(good))
    cache.compiler(0)("x = 1", "<generated x>", "exec")
    cache.save()
    link = tmp_path / "link.marshal"
    link.symlink_to(good)
    found: list[object] = []

    def read_all() -> None:
        found.append(generated_code._read(str(fifo)))
        found.append(read_cache(str(fifo), "key"))
        found.append(generated_code._read(str(link)))

    reader = threading.Thread(target=read_all, daemon=True)
    reader.start()
    reader.join(timeout=10)
    assert not reader.is_alive(), "opening a FIFO planted at a cache file blocked"
    assert found == [({}, {}), None, ({}, {})]
    assert generated_code._read(str(good))[0]  # the file itself is read


def test_attrs_own_records_are_compiled_through_the_cache_as_attrs_is_imported(tmp_path: Path) -> None:
    """attrs defines records of its own (Attribute, Factory...) while its module runs: the cache's
    compile is in place before the module's body, so their methods are kept too (ten scripts)."""
    code = textwrap.dedent(
        """        import json, sys
        assert "attr" not in sys.modules
        from crucible_core import generated_code
        cache = generated_code.install()
        import attr
        print(json.dumps([key.split("\\0")[2] for key in cache._scripts()]))
        """
    )
    env = crucible_env(CRUCIBLE_CACHE_DIR=str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False)
    assert done.returncode == 0, done.stderr
    kept = json.loads(done.stdout)
    assert "<attrs generated __repr__ attr._make.Attribute>" in kept
    assert "<attrs generated __eq__ attr._make.Factory>" in kept
