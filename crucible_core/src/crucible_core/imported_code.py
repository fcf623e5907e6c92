"""A cache, kept between processes, of the code of the modules the `crucible` process imports.

Importing a module the usual way looks for it along the import path (the development venv has
36 entries, one per member), then stats its source, opens, reads and validates its `.pyc`, and
only then unmarshals the code: for the 370 modules a `crucible run` imports, the finding and
the file work cost about as much as the unmarshalling itself (issue 27, docs/performance.md).
Here one file beside the generated-code cache keeps, for each module the process imported from
a source file, where it was found, the source's modification time and size, and its marshalled
code. A later process serves the module from it after one `stat` of the source (and one of each
directory it was looked for in, once per process): same modification time and size, same
directories unchanged, same import path leading to it, or the module is imported as before and
the file written again at exit. (A module with a directory of its own name along the way, which
an `__init__` would turn into the package Python imports instead without changing any directory
looked at, is never kept.) The loader is the standard source loader with only `get_code`
answered here, so `__file__`, `__cached__`, the source for tracebacks and resources are the
same as ever. The file also keeps the modules no finder found (`nt`, `msvcrt`, optional
accelerators: each such import walked every path entry), answered with Python's own
ModuleNotFoundError while the directories along their path are unchanged, and only to an import
statement searched by Python's own finders alone (importlib.util.find_spec still gets None).

Only the `crucible` console script installs it (cli/console_script.py); a test or a program
calling `cli.main.main` imports as Python does. The file is written at exit only when the
process imported a module the file did not hold (or held stale). As with the generated-code
cache, the cache directory must be the user's own: whoever can write the file can run code in
crucible, as whoever can write an installed package's `__pycache__` can.
"""

from __future__ import annotations

import _frozen_importlib
import atexit
import marshal
import os
import stat
import sys
import time
import zlib
from importlib.machinery import BuiltinImporter, FrozenImporter, ModuleSpec, PathFinder, SourceFileLoader
from zipimport import zipimporter

# Only modules the interpreter has built in or frozen: everything imported after the finder is
# installed can come from the cache, so what this module imports cannot (plugin_index brings
# json, re, enum, typing: written at exit, imported then).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from types import CodeType, ModuleType
    from typing import Any

_CODE_TYPE = type(compile("", "", "exec"))  # types.CodeType, without importing types

STEM = "imported-code"
# What the file was written by: code objects are only good for the interpreter that made them,
# and the optimization level decides what a module compiles to (asserts, docstrings).
_HEADER = ("crucible imported code 2", sys.version, sys.implementation.cache_tag, sys.flags.optimize)
_READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC
# The file starts with the length of its index (8 bytes, little-endian), then the index, then
# the code of each module at the offset its entry names (counted from the end of the index).
_LENGTH_BYTES = 8
# Bounds on what is read and written: beyond them the file starts over with this process's modules.
MAX_MODULES = 4096
MAX_INDEX_BYTES = 8 << 20
MAX_CODE_BYTES = 96 << 20
# A source or directory modified this close to the process's start (or after it) is not kept:
# file systems stamp modification times from a clock that can lag the real one by a tick, so
# a file edited after the module was imported could otherwise carry a time from before.
SETTLED_NS = 2_000_000_000

# One module: (origin, source mtime_ns, source size, search locations of a package or None, the
# import path entries looked in for it (the first ones of sys.path or of the parent's __path__,
# up to the one that held it), offset of its code, length of its code).
_Entry = tuple[str, int, int, list[str] | None, list[str], int, int]


def _code_span(entry: Any) -> tuple[int, int] | None:
    """Where a kept entry's code lies (offset, length), or None for an entry of another shape."""
    if type(entry) is not tuple or len(entry) != 7 or type(entry[5]) is not int or type(entry[6]) is not int:
        return None
    if type(entry[4]) is not list or not (entry[3] is None or type(entry[3]) is list):
        return None
    return (entry[5], entry[6]) if entry[5] >= 0 and entry[6] > 0 else None


# The import system's function that asks the finders for an import statement (not
# importlib.util.find_spec), and the finders Python puts last on the meta path.
_IMPORTING = getattr(_frozen_importlib, "_find_and_load_unlocked").__code__  # noqa: B009  # private
_STANDARD_FINDERS: list[Any] = [BuiltinImporter, FrozenImporter, PathFinder]


def _default_path_hooks() -> bool:
    """Whether the path hooks are Python's own two (zip files, directories): then a directory
    that has not changed has no module it did not have before."""
    hooks = sys.path_hooks
    return (
        len(hooks) == 2
        and hooks[0] is zipimporter
        and getattr(hooks[1], "__qualname__", "").startswith("FileFinder.path_hook")
    )


def _mtime(path: str) -> int:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return -1  # missing: a directory appearing there later changes what is found


class CachedModuleLoader(SourceFileLoader):
    """The standard source loader, with the module's code taken from the cache file."""

    def __init__(self, fullname: str, path: str, cache: ImportedCode) -> None:
        super().__init__(fullname, path)
        self.cache = cache

    def get_code(self, fullname: str) -> CodeType | None:
        code = self.cache.code_of(fullname) if fullname == self.name else None
        return code if code is not None else super().get_code(fullname)


class ImportedCode:
    """The modules of one cache file, read on the first import; a meta path finder for them."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self.started_ns = time.time_ns()
        self._fd: int | None = None
        self._index: dict[str, Any] | None = None
        self._directories: dict[str, int] = {}
        self._code_start = 0
        self._checked: dict[int, bool] = {}
        # Modules imported before the finder was installed: never served from here, never written.
        self._before = set(sys.modules)
        self.served: set[str] = set()
        self.stale: set[str] = set()  # held, but not what the process imported: rewritten at exit
        self.missed: set[str] = set()
        # Modules the file says no finder finds along their import path (`nt`, `msvcrt`, optional
        # accelerators): each failed import walked every path entry, some 0.2 ms apiece.
        self._absent: dict[str, Any] = {}
        self.absent_served: set[str] = set()
        self._missed_along: dict[str, list[str]] = {}  # where each missed module was looked for
        self._default_hooks = _default_path_hooks()

    # -- reading ---------------------------------------------------------------------------------

    def _read_index(self) -> dict[str, Any]:
        if self._index is None:
            self._index = {}
            if self.path is not None:
                self._open()
        return self._index

    def _open(self) -> None:
        assert self.path is not None
        try:
            # Never through a link, and a FIFO planted there neither blocks the open nor is read.
            fd = os.open(self.path, _READ_FLAGS)
        except OSError:
            return
        try:
            st = os.fstat(fd)
            # Code crucible runs: only a regular file of this user's that nobody else may write.
            if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o022:
                raise ValueError("not ours")
            head = os.pread(fd, _LENGTH_BYTES, 0)
            length = int.from_bytes(head, "little") if len(head) == _LENGTH_BYTES else -1
            if not 0 < length <= min(MAX_INDEX_BYTES, st.st_size - _LENGTH_BYTES):
                raise ValueError("no index")
            data = os.pread(fd, length, _LENGTH_BYTES)
            header, directories, index, absent = marshal.loads(data) if len(data) == length else (None,) * 4
            if (
                header != _HEADER
                or type(directories) is not dict
                or type(index) is not dict
                or type(absent) is not dict
            ):
                raise ValueError("another interpreter's, or not a cache")
        except (OSError, ValueError, EOFError, TypeError):
            os.close(fd)
            return  # unreadable: replaced at exit by this process's modules
        self._fd = fd
        self._index = index
        self._directories = directories
        self._absent = absent
        self._code_start = _LENGTH_BYTES + length

    def _entry(self, name: str) -> _Entry | None:
        # Only the shape is checked here; a field of the wrong type fails its first use, which
        # find_spec and code_of take as a miss.
        entry = self._read_index().get(name)
        return entry if type(entry) is tuple and len(entry) == 7 else None

    def _unchanged(self, directories: list[str]) -> bool:
        """Whether each directory has the modification time the file recorded (once per list: the
        file shares one list among the modules found along the same entries)."""
        known = self._checked.get(id(directories))
        if known is None:
            recorded = self._directories
            known = all(_mtime(directory) == recorded.get(directory) for directory in directories)
            self._checked[id(directories)] = known
        return known

    def code_of(self, name: str) -> CodeType | None:
        """The kept code of a module this finder served; None if the file no longer yields it."""
        entry = self._entry(name)
        if entry is None or self._fd is None:
            return None
        offset, length = entry[5], entry[6]
        try:
            data = (
                os.pread(self._fd, length, self._code_start + offset) if 0 < length <= MAX_CODE_BYTES else b""
            )
            code = marshal.loads(data) if len(data) == length else None
        except (OSError, ValueError, EOFError, TypeError):
            code = None
        if type(code) is not _CODE_TYPE:
            self._forget(name)
            return None
        return code

    def _forget(self, name: str) -> None:
        self.served.discard(name)
        self.stale.add(name)

    # -- finding ---------------------------------------------------------------------------------

    def find_spec(self, name: str, path: Any = None, target: ModuleType | None = None) -> ModuleSpec | None:
        entry = self._entry(name)
        if entry is None:
            along = sys.path if path is None else path
            along = along if type(along) is list else list(along)
            if self._known_absent(name, along):
                self.absent_served.add(name)
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            self.missed.add(name)
            self._missed_along[name] = along[:]
            return None
        try:
            spec = self._spec(name, path, *entry)
        except (OSError, TypeError, ValueError):  # gone, or a field of the wrong type
            spec = None
        if spec is None:
            self._forget(name)
            return None
        self.served.add(name)
        return spec

    def _known_absent(self, name: str, along: list[str]) -> bool:
        """Whether the file says `name` is found nowhere along `along`, still unchanged, and this
        is an import statement's search that only the standard finders would go on with.

        Raising here is what the import would end with; a finder's question that is not an
        import (importlib.util.find_spec) must still get None, and a finder after Python's own,
        or a path hook of another kind, could still find the module."""
        looked = self._absent.get(name)
        if looked is None or looked != along:
            return False
        try:
            caller = sys._getframe(3)  # _known_absent <- find_spec <- _find_spec <- _find_and_load_unlocked
        except ValueError:  # called from nearer the top: not by the import system
            return False
        return (
            caller.f_code is _IMPORTING
            and sys.meta_path[-3:] == _STANDARD_FINDERS
            and self._default_hooks
            and _default_path_hooks()
            and self._unchanged(looked)
        )

    def _spec(
        self,
        name: str,
        path: Any,
        origin: str,
        mtime: int,
        size: int,
        locations: list[str] | None,
        looked_in: list[str],
        *_code: int,
    ) -> ModuleSpec | None:
        """The module's spec when the standard finders would find it where the file says, unchanged."""
        current = sys.path if path is None else path
        if type(current) is not list:
            current = list(current)  # a namespace package's path
        if current[: len(looked_in)] != looked_in or not self._unchanged(looked_in):
            return None  # another import path, or a directory along it changed (a module added?)
        if locations is not None and not self._unchanged(locations):
            return None  # a package's directory changed (an `__init__` of another kind added?)
        st = os.stat(origin)
        if st.st_mtime_ns != mtime or st.st_size != size:
            return None  # the source changed
        spec = ModuleSpec(
            name, CachedModuleLoader(name, origin, self), origin=origin, is_package=locations is not None
        )
        if locations is not None:
            spec.submodule_search_locations = list(locations)
        spec.has_location = True
        return spec

    def invalidate_caches(self) -> None:
        """importlib.invalidate_caches(): directories are looked at again."""
        self._checked.clear()

    # -- writing ---------------------------------------------------------------------------------

    def save(self) -> None:
        """Write the file again if this process imported a module it did not hold, or found one it
        held stale (atomically; never fails)."""
        if self.path is None:
            return
        fresh = {name: made for name in sorted(self.missed | self.stale) if (made := self._new_entry(name))}
        absent = {
            name: along for name in sorted(self.missed) if (along := self._new_absence(name)) is not None
        }
        if not fresh and not self.stale and not absent:
            return  # only misses nothing can be kept for: built-in, frozen, extension modules
        index = self._read_index()
        kept = {name: index[name] for name in index if name not in self.stale and name not in fresh}
        if len(kept) + len(fresh) > MAX_MODULES:
            kept = {name: index[name] for name in self.served if name in kept}
        try:
            self._write(kept, fresh, absent)
        except (OSError, ValueError, EOFError, TypeError):
            return
        self.missed.clear()
        self.stale.clear()

    def _write(
        self, kept: dict[str, Any], fresh: dict[str, tuple[_Entry, bytes]], absent: dict[str, list[str]]
    ) -> None:
        entries = [(name, entry) for name, entry in kept.items() if _code_span(entry) is not None]
        old = b""
        if entries and self._fd is not None:
            end = max(sum(_code_span(entry) or (0, 0)) for _name, entry in entries)
            old = os.pread(self._fd, min(end, MAX_CODE_BYTES), self._code_start)
        chunks: list[bytes] = []
        index: dict[str, _Entry] = {}
        shared: dict[tuple[str, ...], list[str]] = {}  # one list per path prefix: checked once (_unchanged)
        directories: dict[str, int] = {}

        size = [0]
        # The directories this process looked at again (for its fresh entries and absences), as
        # they are now. An entry or absence of the file's along one that changed since the file
        # recorded it is dropped, not carried over: one directory has one time in the file, and
        # the new time would vouch for what the process never looked for again (a module since
        # shadowed there).
        now: dict[str, int] = {}
        for entry, _code in fresh.values():
            for directory in (*entry[4], *(entry[3] or ())):
                if directory not in now:
                    now[directory] = _mtime(directory)
        for along in absent.values():
            for directory in along:
                if directory not in now:
                    now[directory] = _mtime(directory)
        # _new_entry and _new_absence found these settled; one changed since (a module added by
        # another process just now) has a time that must not vouch for what was looked at before.
        unsettled = {directory for directory, mtime in now.items() if mtime >= self.started_ns - SETTLED_NS}
        recorded = self._directories

        def still(directories: Iterable[str]) -> bool:
            """Whether none of `directories` the process looked at again changed since the file's time."""
            return all(
                recorded.get(directory, -2) == now.get(directory, recorded.get(directory, -2))
                for directory in directories
            )

        def add(name: str, entry: _Entry, code: bytes, mtimes: dict[str, int]) -> None:
            looked_in = shared.setdefault(tuple(entry[4]), list(entry[4]))
            watched = (*looked_in, *(entry[3] or ()))  # the import path's directories, the package's
            offset = size[0]
            if offset + len(code) > MAX_CODE_BYTES:
                return
            if mtimes is recorded and not still(watched):
                return
            if mtimes is now and not unsettled.isdisjoint(watched):
                return
            for directory in watched:
                directories[directory] = mtimes.get(directory, -2)  # -2: never a stat's answer
            index[name] = (entry[0], entry[1], entry[2], entry[3], looked_in, offset, len(code))
            chunks.append(code)
            size[0] += len(code)

        for name, entry in sorted(entries):
            start, length = _code_span(entry) or (0, 0)
            if start + length <= len(old):
                add(name, entry, old[start : start + length], self._directories)
        for name, (entry, code) in sorted(fresh.items()):
            add(name, entry, code, now)
        # Absences: the ones found this time, and the file's others no module of that name was
        # imported in place of, their directories as the file recorded them.
        nowhere: dict[str, list[str]] = {}
        kept_absent = [
            (name, along, self._directories)
            for name, along in self._absent.items()
            if type(name) is str
            and type(along) is list
            and name not in sys.modules
            and name not in absent
            and still(along)
        ]
        for name, along, mtimes in [*kept_absent, *((name, along, now) for name, along in absent.items())]:
            if len(nowhere) >= MAX_MODULES:
                break
            if mtimes is now and not unsettled.isdisjoint(along):
                continue
            for directory in along:
                directories[directory] = mtimes.get(directory, -2)
            nowhere[name] = shared.setdefault(tuple(along), list(along))
        head = marshal.dumps((_HEADER, directories, index, nowhere))
        from crucible_core.plugin_index import write_bytes

        write_bytes(self.path, b"".join([len(head).to_bytes(_LENGTH_BYTES, "little"), head, *chunks]))

    def _settled(self, path: str) -> bool:
        """Whether `path` (missing, or) was last changed well before this process started."""
        return _mtime(path) < self.started_ns - SETTLED_NS

    def _new_absence(self, name: str) -> list[str] | None:
        """The import path entries a module this process failed to import was looked for in, when
        Python's own finders find it in none of them (asked again here), all of them settled."""
        along = self._missed_along.get(name)
        if along is None or name in sys.modules or not self._default_hooks or not _default_path_hooks():
            return None
        if not all(type(entry) is str and os.path.isabs(entry) and self._settled(entry) for entry in along):
            return None
        try:
            if (
                BuiltinImporter.find_spec(name)
                or FrozenImporter.find_spec(name)
                or PathFinder.find_spec(name, along)
            ):
                return None
        except (ImportError, ValueError, OSError):
            return None
        return along

    def _new_entry(self, name: str) -> tuple[_Entry, bytes] | None:
        """The entry and marshalled code of a module this process imported the usual way, or None
        when it cannot be kept: not from a source file, found other than along the import path,
        or changed since shortly before this process started."""
        module = sys.modules.get(name)
        spec = getattr(module, "__spec__", None)
        loader = getattr(spec, "loader", None)
        origin = getattr(spec, "origin", None)
        if (
            name in self._before
            or spec is None
            or type(loader) not in (SourceFileLoader, CachedModuleLoader)
            or type(origin) is not str
        ):
            return None
        parent, _, tail = name.rpartition(".")
        along = sys.path if not parent else getattr(sys.modules.get(parent), "__path__", None)
        if along is None:
            return None
        along = [entry for entry in along if type(entry) is str]
        locations = spec.submodule_search_locations
        if locations is not None:
            locations = [folder for folder in locations if type(folder) is str]
        # Where the standard finder takes it from: the first path entry holding it is the one it came from.
        relative = os.path.join(tail, "__init__.py") if locations is not None else f"{tail}.py"
        found = next((at for at, entry in enumerate(along) if os.path.join(entry, relative) == origin), None)
        if found is None:
            return None
        looked_in = along[: found + 1]
        if not all(os.path.isabs(entry) for entry in looked_in):
            return None  # `""` or a relative entry: another working directory finds other modules
        if not all(self._settled(directory) for directory in (*looked_in, *(locations or ()))):
            return None
        # A directory of the module's name without `__init__` along the way (a namespace portion,
        # or what a package turned module left behind) loses to the module until an `__init__` is
        # added to it, which changes that directory's time only: such a module is not kept.
        before_origin = looked_in if locations is None else looked_in[:-1]
        if any(os.path.isdir(os.path.join(entry, tail)) for entry in before_origin):
            return None
        try:
            before = os.stat(origin)
            if before.st_mtime_ns >= self.started_ns - SETTLED_NS:
                return None
            code = loader.get_code(name)  # type: ignore[union-attr]  # a source loader (checked above)
            after = os.stat(origin)
        except (OSError, ImportError):
            return None
        if code is None or (before.st_mtime_ns, before.st_size) != (after.st_mtime_ns, after.st_size):
            return None
        return (origin, before.st_mtime_ns, before.st_size, locations, looked_in, 0, 0), marshal.dumps(code)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def cache_path() -> str | None:
    """plugin_index.cache_file(STEM, ".marshal"), without importing plugin_index (see the imports)."""
    directory = os.environ.get("CRUCIBLE_CACHE_DIR")
    if not directory:
        home = os.environ.get("HOME")
        base = os.environ.get("XDG_CACHE_HOME") or (os.path.join(home, ".cache") if home else "")
        if not base:
            return None
        directory = os.path.join(base, "crucible")
    tag = zlib.crc32(f"{sys.executable}\0{sys.prefix}".encode("utf-8", "surrogateescape"))
    return os.path.join(directory, f"{STEM}-{tag:08x}.marshal")


_installed: ImportedCode | None = None


def install() -> ImportedCode | None:
    """Serve the modules this process imports from now on from this interpreter's cache file.

    For the `crucible` process only (see the module docstring); None when there is no cache
    directory. The finder goes in front of Python's own ones, behind any a program put there.
    """
    global _installed
    if _installed is not None:
        return _installed
    path = cache_path()
    if path is None:
        return None
    cache = _installed = ImportedCode(path)
    at = next((at for at, finder in enumerate(sys.meta_path) if finder is BuiltinImporter), 0)
    sys.meta_path.insert(at, cache)
    pid = os.getpid()

    def save() -> None:
        if os.getpid() == pid:  # not a fork's exit
            cache.save()
            cache.close()

    atexit.register(save)
    return cache
