"""A cache, kept between processes, of the code attrs and cattrs write and compile at run time.

attrs writes the source of each record class's `__init__` (and, for a class not on the shared
methods of contract/records.py, of its repr, equality and hash) and compiles it when the class
is defined; cattrs does the same for every structuring and unstructuring function it generates.
A `crucible run` compiled some 320 such scripts before its first iteration, about 40 ms of CPU
(issue 27, docs/performance.md). Python keeps the bytecode of modules in `__pycache__`, but not
of these. Here the code objects are kept in one file beside the plugin index (marshal, as a
`.pyc` keeps them), found by the script's file name and used only when the script's whole text
is the one kept, so anything that changes a script (a new attrs or cattrs, an edited class)
compiles it again. attrs writes a per-process seed into each hash method it generates: such a
script is kept with the seed taken out, and the seed put back into the code (`_seeded`). Any
other script whose text differs from one process to the next is left out once it was seen
changing twice in a row; the file remembers a checksum of its last text, and a later process
that finds that same text again keeps it once more (so two upgrades with one run between them
do not leave a class compiled at every start for good). A script still changing after
VOLATILE_FOR_GOOD more processes is given up on, and stops the file being written.

Only the `crucible` process itself installs it (cli/main.py); a test or a program calling main()
with arguments leaves attrs and cattrs as they are. The file is read when the first script is
compiled and written again at exit only if a script it did not hold was compiled. The cache
directory must be the user's own: whoever can write the file can run code in crucible, as
whoever can write an installed package's `__pycache__` can.
"""

from __future__ import annotations
import __future__

import atexit
import builtins
import marshal
import os
import stat
import sys
import zlib
from collections.abc import Callable
from importlib.machinery import ModuleSpec, PathFinder
from types import CodeType, ModuleType
from typing import Any

from crucible_core.plugin_index import cache_file, write_bytes

STEM = "generated-code"
# The modules whose `compile(source, filename, mode)` calls go through the cache, with the
# compiler flags their own calls pass on: attrs and cattrs are written with `from __future__
# import annotations`; typing compiles each string annotation it resolves (ForwardRef), some
# 250 at a run's start, as "<string>".
_ANNOTATIONS = __future__.annotations.compiler_flag
PATCHED = {
    "attr._make": _ANNOTATIONS,
    "cattrs.gen": _ANNOTATIONS,
    "typing": 0,
    "crucible_core.contract.wire": _ANNOTATIONS,  # its own unstructure functions (to_fields)
}
# Scripts without a name of their own are found by their text.
_NAMELESS = ("", "<string>")
# What the file was written by: code objects are only good for the interpreter that made them.
_HEADER = ("crucible generated code 3", sys.version, sys.implementation.cache_tag)
# Stands in a kept script for the per-process seed of an attrs hash method (see _seeded): a number
# no script holds otherwise (attrs' seeds are string hashes, as likely to be it as any other).
SEED_PLACEHOLDER = 0x5EED_5EED_5EED_5EED
_READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC
# Beyond this many scripts the file starts over with the ones the writing process used.
MAX_SCRIPTS = 4096
# A script whose text was found changed this many times in a row is no longer kept (volatile)...
VOLATILE_AFTER = 2
# ...until a process finds the text the last one saw; after this many more changes, not even that.
VOLATILE_FOR_GOOD = 8

# One kept script: its text, its code and how many times in a row it was found changed.
_Kept = tuple[str, CodeType, int]
# One volatile script: the checksum of the last text seen, and how many times it changed since.
_Volatile = tuple[int, int]


class CodeCache:
    """The scripts of one cache file, read on first use; `compile` stands in for the builtin."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self._kept: dict[str, _Kept] | None = None
        self._volatile: dict[str, _Volatile] = {}
        self._used: set[str] = set()
        self.hits = 0
        self.misses = 0
        self.dirty = False  # something to write at exit

    def compiler(self, flags: int) -> Callable[..., Any]:
        """The compile() to put in a module whose own calls pass on `flags`."""

        def compile(source: Any, filename: Any, mode: Any, *rest: Any, **options: Any) -> Any:
            if rest or options or type(source) is not str or type(filename) is not str:
                return builtins.compile(source, filename, mode, *rest, **options)
            return self.compile(source, filename, mode, flags)

        return compile

    def compile(self, source: str, filename: str, mode: str, flags: int) -> CodeType:
        """compile(source, filename, mode, flags, dont_inherit=True), from the file when it holds this very text."""
        seeded = _seeded(source)
        if seeded is None:
            return self._compile(source, filename, mode, flags)
        text, seed = seeded
        return _with_constant(self._compile(text, filename, mode, flags), SEED_PLACEHOLDER, seed)

    def _compile(self, source: str, filename: str, mode: str, flags: int) -> CodeType:
        kept = self._scripts()
        key = f"{flags}\0{mode}\0{filename}"
        if filename in _NAMELESS:
            key = f"{key}\0{source}"
        found = kept.get(key)
        if found is not None and found[0] == source:
            self.hits += 1
            self._used.add(key)
            if found[2]:  # the same text twice in a row: not volatile after all
                kept[key] = (source, found[1], 0)
                self.dirty = True
            return found[1]
        self.misses += 1
        code: CodeType = builtins.compile(source, filename, mode, flags, True)
        volatile = self._volatile.get(key)
        if volatile is not None:
            self._recheck(key, source, code, volatile)
            return code
        changes = found[2] + 1 if found is not None else 0
        if changes >= VOLATILE_AFTER:
            del kept[key]
            self._volatile[key] = (_checksum(source), 0)
        else:
            kept[key] = (source, code, changes)
            self._used.add(key)
        self.dirty = True
        return code

    def _recheck(self, key: str, source: str, code: CodeType, volatile: _Volatile) -> None:
        """A volatile script compiled again: kept once more if its text is the one seen last."""
        last, changes = volatile
        if changes >= VOLATILE_FOR_GOOD:
            return  # it changes in every process: given up on, nothing to write
        checksum = _checksum(source)
        if checksum == last:  # the same text in two processes: it settled (an upgrade's new text)
            del self._volatile[key]
            self._scripts()[key] = (source, code, 0)
            self._used.add(key)
        else:
            self._volatile[key] = (checksum, changes + 1)
        self.dirty = True

    def _scripts(self) -> dict[str, _Kept]:
        if self._kept is None:
            self._kept, self._volatile = _read(self.path)
        return self._kept

    def save(self) -> None:
        """Write the file again if this process compiled what it did not hold (atomically; never fails)."""
        if not self.dirty or self._kept is None:
            return
        kept = self._kept
        if len(kept) > MAX_SCRIPTS:
            kept = {key: kept[key] for key in self._used if key in kept}
        volatile = sorted((key, *entry) for key, entry in self._volatile.items())[:MAX_SCRIPTS]
        try:
            data = marshal.dumps((_HEADER, kept, volatile))
        except ValueError:  # something unmarshallable: keep the file as it is
            return
        write_bytes(self.path, data)
        self.dirty = False


def _seeded(source: str) -> tuple[str, int] | None:
    """An attrs script with a hash method, as (its text with the method's seed replaced by
    SEED_PLACEHOLDER, the seed); None for any other script.

    attrs seeds each class's generated `__hash__` with the string hash of a name, which differs
    from one process to the next, and writes it into the script as a number: without this, the
    27 such scripts of a `crucible run` (attrs' own validators, cattrs' overrides, the records
    still hashed by attrs) were compiled by every process, some 6 ms (issue 27). The kept code is
    that of the text with the placeholder; the seed is put back into its constants. Only the
    column a traceback would mark on the seed's own line (which raises nothing) is the placeholder's.
    """
    at = source.find("hash((\n")
    if at < 0:
        return None
    start = at + len("hash((\n")
    end = source.find(",\n", start)
    number = source[start:end].strip()
    if end < 0 or not number.removeprefix("-").isdigit() or source.find("hash((\n", end) >= 0:
        return None  # not the shape attrs writes, or two hash methods: compiled as it is
    lead = end - len(source[start:end].lstrip())
    return f"{source[:lead]}{SEED_PLACEHOLDER}{source[end:]}", int(number)


def _with_constant(code: CodeType, old: int, new: int) -> CodeType:
    """`code` with the integer constant `old` made `new`, in it and in the functions it defines."""
    consts = tuple(
        new
        if type(value) is int and value == old
        else _with_constant(value, old, new)
        if type(value) is CodeType
        else value
        for value in code.co_consts
    )
    return code.replace(co_consts=consts)


def _checksum(source: str) -> int:
    return zlib.crc32(source.encode("utf-8", "surrogatepass"))


def _read(path: str | None) -> tuple[dict[str, _Kept], dict[str, _Volatile]]:
    """The file's scripts and volatile names; empty when it is missing, unreadable, or another
    interpreter's. Each entry's shape is checked here: the file is only trusted to be ours."""
    if path is None:
        return {}, {}
    try:
        # Never through a link, and a FIFO planted there neither blocks the open nor is read.
        with os.fdopen(os.open(path, _READ_FLAGS), "rb") as handle:
            st = os.fstat(handle.fileno())
            # Code crucible runs: only a regular file of this user's that nobody else may write.
            if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o022:
                return {}, {}
            header, kept, volatile = marshal.loads(handle.read())
    except (OSError, ValueError, EOFError, TypeError):
        return {}, {}
    if header != _HEADER or type(kept) is not dict or type(volatile) is not list:
        return {}, {}
    scripts = {
        key: entry
        for key, entry in kept.items()
        if type(key) is str
        and type(entry) is tuple
        and len(entry) == 3
        and type(entry[0]) is str
        and type(entry[1]) is CodeType
        and type(entry[2]) is int
    }
    changing = {
        entry[0]: (entry[1], entry[2])
        for entry in volatile
        if type(entry) is tuple
        and len(entry) == 3
        and type(entry[0]) is str
        and type(entry[1]) is int
        and type(entry[2]) is int
    }
    return scripts, changing


class _PatchOnImport:
    """A meta path finder that gives PATCHED modules the cache's compile as they are imported."""

    def __init__(self, cache: CodeCache) -> None:
        self.cache = cache

    def find_spec(self, name: str, path: Any, target: ModuleType | None = None) -> ModuleSpec | None:
        if name not in PATCHED:
            return None
        spec = PathFinder.find_spec(name, path, target)
        loader = spec.loader if spec is not None else None
        run = getattr(loader, "exec_module", None)
        if loader is None or run is None:
            return spec
        compile = self.cache.compiler(PATCHED[name])

        def exec_module(module: ModuleType) -> None:
            # Before the module's body runs: attrs defines its own record classes (Attribute,
            # Factory...) with the code it generates, ten scripts compiled at every start otherwise.
            module.compile = compile  # type: ignore[attr-defined]  # shadows the builtin there
            run(module)

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


_installed: CodeCache | None = None


def install() -> CodeCache | None:
    """Route attrs' and cattrs' compile through this interpreter's cache file, from now until exit.

    For the `crucible` process only (see the module docstring); None when there is no cache
    directory. A module already imported is patched at once, the others as they are imported.
    """
    global _installed
    if _installed is not None:
        return _installed
    path = cache_file(STEM, ".marshal")
    if path is None:
        return None
    cache = _installed = CodeCache(path)
    for name in PATCHED:
        module = sys.modules.get(name)
        if module is not None:
            module.compile = cache.compiler(PATCHED[name])  # type: ignore[attr-defined]
    if any(name not in sys.modules for name in PATCHED):
        sys.meta_path.insert(0, _PatchOnImport(cache))
    pid = os.getpid()
    atexit.register(lambda: cache.save() if os.getpid() == pid else None)  # not a fork's exit
    return cache
