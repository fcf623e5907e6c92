"""Hashing, writing and reading git objects: loose objects directly, packs through dulwich."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import itertools
import os
import stat
import time
import zlib
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, BinaryIO

from crucible_core.api import RunFailed
from crucible_world_git import dulwich_fanout, dulwich_names

if TYPE_CHECKING:
    from dulwich.object_store import DiskObjectStore
    from dulwich.pack import Pack

    from crucible_world_git.object_watch import ObjectWatch

# git's core.looseCompression default: loose objects favour speed over size.
LOOSE_COMPRESSION = 1
# Files at least this big are hashed and compressed in chunks instead of read whole.
STREAM_THRESHOLD = 32 << 20
# Objects written inside packed() go to a new pack each time this much has gathered.
PACK_BATCH_BYTES = 64 << 20
# A held store (the kept record) keeps the bodies of the objects it wrote last in memory, up to
# this many bytes in all, for read(): the next stage reads the kept tree back for its ignore
# rules, and through dulwich, from the record's newest pack, opening that pack cost more than
# the rest of the read. (The workspace's store reads its files: what the keep copies from there
# into the record is verified as it is on disk.)
RECENT_BYTES = 1 << 20
# A held store (the kept record) merges its own packs once it has more than this many.
SMALL_PACKS = 8
# A pack written longer ago than this may be on disk for good (ext4 commits every 5 s): merging
# it away, the merged pack is fsynced first (see _any_settled).
SETTLED_NS = 5_000_000_000
_CHUNK = 1 << 20

_TYPE_NAMES = {1: b"commit", 2: b"tree", 3: b"blob", 4: b"tag"}
_TYPE_NUMBERS = {name: number for number, name in _TYPE_NAMES.items()}
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
# Fan-out directories that packing emptied wait here, beside objects/ (where no check walks
# them), and are renamed back into objects/ when a loose object needs one: on this machine's
# ext4 a mkdir costs the kernel about seven times a rename, and an rmdir stalls besides
# (docs/performance.md, the ninth round).
SPARE_DIRS = b"crucible-spare-dirs"
# More spare directories than this are removed instead (objects/ has at most 256 fan-outs).
MAX_SPARE_DIRS = 256
_SPARE_PREFIX = b"fanout-"
_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def open_regular(path: bytes) -> BinaryIO:
    """Open a file the agent may have replaced for reading: never through a link, never blocking
    on a FIFO; OSError (ENXIO, ELOOP or EINVAL) for anything but a regular file."""
    fd = os.open(path, _READ)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file", os.fsdecode(path))
    return os.fdopen(fd, "rb")


def object_id(kind: bytes, body: bytes) -> bytes:
    digest = hashlib.sha1(b"%s %d\0" % (kind, len(body)))
    digest.update(body)
    return digest.digest()


class ObjectDatabase:
    """One repository's objects. Knows which ids it has confirmed present, so each is checked once."""

    def __init__(self, store: DiskObjectStore) -> None:
        dulwich_fanout.install()  # before this store loads any pack index
        self.store = store
        self.root = os.fsencode(store.path)
        self._present: set[bytes] = set()
        self._made_dirs: set[bytes] = set()
        # The spare fan-out directories' names (SPARE_DIRS), listed on first use.
        self._spare_dirs: list[bytes] | None = None
        self._packs: list[Pack] | None = None
        self._listed_packs: tuple[int, int, int] | None = None  # pack/'s signature at that listing
        self._alternates = False
        # A second store that gets a copy of every blob written here (the world's kept record):
        # blobs only, since a tree or commit there promises that everything below it is there too.
        self.tee: ObjectDatabase | None = None
        # Told of every file written here, so a later check knows it is the engine's own.
        self.watch: ObjectWatch | None = None
        # Inside packed(), or held (hold()): objects waiting to be written as one pack, by raw id.
        self._batch: dict[bytes, tuple[bytes, bytes]] | None = None
        # (kind, body) of objects a held store wrote lately, by raw id, oldest first
        # (RECENT_BYTES). Each id was computed from its body before it was written.
        self._recent: dict[bytes, tuple[bytes, bytes]] = {}
        self._recent_bytes = 0
        self._batch_bytes = 0
        self._holding = False  # hold(): the batch is written by flush_held(), as a small pack
        # Small packs found damaged when merging (small_pack.DamagedPack): never merged again here.
        self._damaged: set[bytes] = set()

    def refresh(self) -> None:
        """Re-list the pack directory (once per world operation, not once per object lookup).

        Skipped while the directory's signature is the one it had at the last listing, and that
        listing was taken outside the racy window (object_watch.py): a pack added, removed or
        renamed there moves the directory's times, and its inode when the directory is replaced.
        """
        self._made_dirs.clear()  # checked again each operation: the agent may have replaced one
        signature = self._pack_dir_signature()
        if signature is not None and signature == self._listed_packs and self._packs is not None:
            return
        # dulwich's `packs` lists its cached packs before it drops the ones that vanished (a
        # repack replaced them), so the first read can name a deleted pack: read it twice.
        self.store.packs  # noqa: B018
        self._packs = list(self.store.packs)
        self._alternates = bool(self.store.alternates)
        self._listed_packs = signature

    def _pack_dir_signature(self) -> tuple[int, int, int] | None:
        """pack/'s (inode, mtime, ctime), or None when it cannot vouch for a listing: no watch
        to give the racy window, no directory, or a change within that window of now."""
        if self.watch is None:
            return None
        try:
            st = os.lstat(self.root + b"/pack")
        except OSError:
            return None
        if not stat.S_ISDIR(st.st_mode) or st.st_ctime_ns >= time.time_ns() - self.watch.window_ns:
            return None
        return (st.st_ino, st.st_mtime_ns, st.st_ctime_ns)

    def _loose_path(self, sha: bytes) -> tuple[bytes, bytes]:
        hexsha = sha.hex().encode()
        directory = self.root + b"/" + hexsha[:2]
        return directory, directory + b"/" + hexsha[2:]

    def has(self, sha: bytes) -> bool:
        if sha in self._present or (self._batch is not None and sha in self._batch):
            return True
        _, path = self._loose_path(sha)
        if self._packs is None:
            self.refresh()
        assert self._packs is not None
        if (
            os.path.exists(path)
            or self._packed(sha)
            or (self._alternates and dulwich_names.object_id(sha.hex().encode()) in self.store)
        ):
            self._present.add(sha)
            return True
        return False

    def forget_presence(self) -> None:
        """Forget which objects were seen present: someone deleted objects behind our back."""
        self._present.clear()
        self._recent.clear()  # read() finds out again what the store still holds
        self._recent_bytes = 0

    def on_disk(self, sha: bytes, *, refresh: bool = True) -> bool:
        """has(), asking the disk instead of the memory of earlier answers (someone may have deleted it).

        `refresh=False` trusts the pack list read last (when asking about many objects at once).
        """
        _, path = self._loose_path(sha)
        if os.path.exists(path):
            return True
        if refresh or self._packs is None:
            self.refresh()
        return self._packed(sha) or (
            self._alternates and dulwich_names.object_id(sha.hex().encode()) in self.store
        )

    def _packed(self, sha: bytes) -> bool:
        """Whether a pack of the last listing holds `sha`, listing again once if one of those
        packs is gone before its index was read: another writer of this store (a second world
        over the same kept record, a repack) merged it into a pack the listing does not know."""
        assert self._packs is not None
        try:
            return _in_packs(self._packs, sha)
        except Exception as exc:
            from dulwich.pack import PackFileDisappeared

            if not isinstance(exc, PackFileDisappeared):
                raise
        self._listed_packs = None  # the directory's signature no longer vouches for the listing
        self.refresh()
        assert self._packs is not None
        return _in_packs(self._packs, sha)

    def write(self, kind: bytes, body: bytes) -> bytes:
        """Store an object (unless present already) and return its raw id."""
        sha = object_id(kind, body)
        self._take(sha, kind, body)
        return sha

    def _take(self, sha: bytes, kind: bytes, body: bytes) -> None:
        """write() for an object whose id the caller has just computed from `body` itself."""
        if self._batch is not None and not self.has(sha):
            self._batch[sha] = (kind, body)
            self._batch_bytes += len(body)
            if self.tee is not None and kind == b"blob":
                self.tee._take(sha, kind, body)
            if self._batch_bytes >= PACK_BATCH_BYTES:
                self._flush_batch()
        elif not self.has(sha):
            data = zlib.compress(b"%s %d\0" % (kind, len(body)) + body, LOOSE_COMPRESSION)
            self._write_loose(sha, [data])
            if self.tee is not None and kind == b"blob":
                self.tee._take(sha, kind, body)

    def _remember(self, sha: bytes, kind: bytes, body: bytes) -> None:
        """Keep a copy of an object a held store just wrote (see RECENT_BYTES), forgetting the oldest."""
        size = len(body)
        if size > RECENT_BYTES // 4 or sha in self._recent:
            return
        recent = self._recent
        recent[sha] = (kind, body)
        self._recent_bytes += size
        while self._recent_bytes > RECENT_BYTES:
            oldest = next(iter(recent))
            self._recent_bytes -= len(recent.pop(oldest)[1])

    def write_blob_file(self, path: bytes, size: int) -> bytes:
        """Hash a regular file as a blob, storing it if new; big files never sit in memory whole."""
        if size < STREAM_THRESHOLD:
            with open_regular(path) as f:
                return self.write(b"blob", f.read())
        header = b"blob %d\0" % size
        digest = hashlib.sha1(header)
        total = 0
        for chunk in _chunks(path):
            digest.update(chunk)
            total += len(chunk)
        if total != size:
            raise RunFailed(f"{os.fsdecode(path)} changed while crucible was reading it", hint="retry")
        sha = digest.digest()
        if not self.has(sha):
            compressor = zlib.compressobj(LOOSE_COMPRESSION)
            parts = [compressor.compress(header)]
            parts.extend(compressor.compress(chunk) for chunk in _chunks(path))
            parts.append(compressor.flush())
            self._write_loose(sha, parts, tee=True)
        return sha

    def _write_loose(self, sha: bytes, parts: list[bytes], *, tee: bool = False) -> None:
        tmp, path, fd = self._temporary(sha)
        # Objects are immutable and named by content: a concurrent writer produced the same bytes.
        place_new_file(fd, tmp, path, parts)
        self._present.add(sha)
        if self.watch is not None:
            self.watch.wrote(path[len(self.root) + 1 :])
        if tee and self.tee is not None and not self.tee.has(sha):
            self.tee._write_loose(sha, parts)

    def _temporary(self, sha: bytes) -> tuple[bytes, bytes, int]:
        """(a temporary file's name, the final path, its descriptor) for writing object `sha` loose.

        The name is random and created exclusively, never through a link: nothing the agent
        planted can stand at a name it cannot predict, and one that does is never written
        through. (A fixed name had to be unlinked first: a failed lookup per object written.)
        """
        directory, path = self._loose_path(sha)
        if directory not in self._made_dirs:
            _real_directory(directory, self._take_spare_dir)
            self._made_dirs.add(directory)
        for _ in range(8):
            tmp = directory + b"/tmp_obj_" + os.urandom(8).hex().encode()
            try:
                return tmp, path, os.open(tmp, _CREATE, 0o444)
            except FileExistsError:
                continue  # taken (by chance, or by someone guessing): another name
        raise RunFailed(
            f"could not create a temporary file in {os.fsdecode(directory)}: every name tried was taken",
            hint="check the workspace's .git/objects directory",
        )

    def copy_into(self, target: ObjectDatabase, sha: bytes) -> bytes:
        """Store object `sha` of this database in `target`; return the id its content has.

        The caller compares that id with `sha`: a differing one (b"" when the body is longer
        or shorter than its header says) means the object here is damaged, and then `target`
        did not get it. A loose object of STREAM_THRESHOLD or more
        is inflated, hashed and compressed again in pieces, never whole: the agent can write a
        blob of a few GiB that compresses to almost nothing. So is a whole (not deltified) one
        of that size in a pack. Any other object is read whole (a packed one through dulwich).
        """
        _, path = self._loose_path(sha)
        on_disk = self._batch is None or sha not in self._batch  # not still in an unwritten batch
        if on_disk:
            try:
                f = open_regular(path)
            except FileNotFoundError:
                pass
            else:
                with f:
                    pieces = inflated(f)
                    kind, size, rest = _loose_header(pieces, sha)
                    if size >= STREAM_THRESHOLD:
                        return target._write_stream(sha, kind, size, itertools.chain((rest,), pieces))
                    gathered = bytearray(rest)
                    for piece in pieces:
                        gathered += piece
                        if len(gathered) > size:  # its header lies about its size: read no further
                            return b""
                    return target.write(kind, bytes(gathered))
        big = self._big_packed(sha) if on_disk else None
        if big is not None:
            with big[0] as f:
                return target._write_stream(sha, big[1], big[2], _inflated_entry(f))
        kind, body = self.read(sha)
        return target.write(kind, body)

    def _big_loose(self, sha: bytes) -> bool:
        """Whether loose object `sha` says it is STREAM_THRESHOLD or more (its header alone read)."""
        try:
            with open_regular(self._loose_path(sha)[1]) as f:
                return _loose_header(inflated(f), sha)[1] >= STREAM_THRESHOLD
        except (OSError, zlib.error):
            return False  # the read that packs it says what is wrong

    def _big_packed(self, sha: bytes) -> tuple[BinaryIO, bytes, int] | None:
        """(the pack file positioned at the object's data, its kind, its size) when `sha` is a
        whole (not deltified) object of STREAM_THRESHOLD or more in one of the packs here, as
        `git add` stores a file past core.bigFileThreshold; None otherwise."""
        if self._packs is None:
            self.refresh()
        assert self._packs is not None
        raw = dulwich_names.raw_object_id(sha)
        for pack in self._packs:
            if raw not in pack:
                continue
            offset = pack.index.object_offset(raw)
            f = open_regular(self.root + b"/pack/" + os.fsencode(os.path.basename(pack.data.filename)))
            try:
                f.seek(offset)
                type_num, size = _pack_entry_header(f)
            except BaseException:
                f.close()
                raise
            if type_num in _TYPE_NAMES and size >= STREAM_THRESHOLD:
                return f, _TYPE_NAMES[type_num], size
            f.close()
            return None
        return None

    def _write_stream(self, sha: bytes, kind: bytes, size: int, pieces: Iterator[bytes]) -> bytes:
        """Write the object claiming id `sha` from its body's pieces, hashing as it goes; kept
        only when its id is `sha`. Returns the id it has (b"" when the body is not `size` long)."""
        if self.has(sha):
            return sha
        header = b"%s %d\0" % (kind, size)
        digest = hashlib.sha1(header)
        compressor = zlib.compressobj(LOOSE_COMPRESSION)
        total = 0
        tmp, path, fd = self._temporary(sha)
        try:
            with os.fdopen(fd, "wb", closefd=False) as f:
                f.write(compressor.compress(header))
                for piece in pieces:
                    digest.update(piece)
                    total += len(piece)
                    if total > size:
                        break  # more than its header says: not the object it names
                    f.write(compressor.compress(piece))
                f.write(compressor.flush())
        except BaseException:
            os.unlink(tmp)
            raise
        finally:
            os.close(fd)
        actual = digest.digest() if total == size else b""  # its header gave the wrong size
        if actual != sha:
            os.unlink(tmp)
            return actual
        os.replace(tmp, path)
        self._present.add(sha)
        if self.watch is not None:
            self.watch.wrote(path[len(self.root) + 1 :])
        return sha

    @contextlib.contextmanager
    def packed(self) -> Iterator[None]:
        """Objects written inside go into packs rather than one loose file each (a whole tree
        committed at once: fewer files to write now and to look at on every later check).
        They are all on disk when the block ends; files of STREAM_THRESHOLD or more stay loose.
        On a held store (hold()) the block's objects are simply held with the rest."""
        if self._holding:
            yield
            return
        self._batch = {}
        try:
            yield
            self._flush_batch()
        finally:
            self._batch = None
            self._batch_bytes = 0

    def hold(self) -> None:
        """From now on objects written here wait in memory until flush_held() writes them as one
        small pack (the kept record: one keep's objects in two files, see small_pack.py).
        has() and read() see them meanwhile; objects of STREAM_THRESHOLD or more go loose."""
        if self._batch is None:
            self._batch = {}
        self._holding = True

    def flush_held(self) -> None:
        """Write the objects hold() gathered; they are all on disk when this returns."""
        if self._holding:
            self._flush_batch()

    def _flush_batch(self) -> None:
        batch = self._batch
        if batch:
            objects = ((sha, kind, body) for sha, (kind, body) in batch.items())
            if self._holding:
                self._add_small_pack(len(batch), objects)
                for sha, (kind, body) in batch.items():
                    self._remember(sha, kind, body)
            else:
                self._add_pack(len(batch), objects)
            self._present.update(batch)
            batch.clear()
        self._batch_bytes = 0

    def _add_small_pack(self, count: int, objects: Iterator[tuple[bytes, bytes, bytes]]) -> None:
        from crucible_world_git import small_pack

        pack_dir = self.root + b"/pack"
        if pack_dir not in self._made_dirs:
            _real_directory(pack_dir)
            self._made_dirs.add(pack_dir)
        small_pack.write_pack(pack_dir, count, objects)
        self.refresh()
        self.consolidate()

    def consolidate(self) -> None:
        """Merge this store's own small packs once there are more than SMALL_PACKS of them.

        Their entries are copied byte for byte (small_pack.merge_packs): nothing is read
        through dulwich, inflated or compressed again.

        The smallest go together, as long as the next one is no bigger than what has gathered:
        a pack is rewritten about as often as its size doubles, so a long run's record holds a
        few packs of geometric sizes, not one pack per keep (each pack costs every lookup of a
        missing object one index search). Only packs written here are merged (small_pack.PREFIX).

        Merging only spares lookups: a pack found damaged is left out (and as it is, where a
        reader's checks find it), and a merge that fails otherwise (a full disk) leaves the
        packs as they were; the keep that wrote the newest is whole on disk all the same.
        """
        from crucible_world_git import small_pack

        assert self._packs is not None
        prefix = self.root + b"/pack/" + small_pack.PREFIX
        mine = [
            pack
            for pack in self._packs
            if os.fsencode(pack._basename).startswith(prefix)
            and os.fsencode(pack._basename) not in self._damaged
        ]
        if len(mine) <= SMALL_PACKS:
            return
        ours = sorted(((len(pack), pack) for pack in mine), key=lambda item: item[0])
        take: list[Pack] = []
        gathered = 0
        for size, pack in ours:
            if len(take) >= 2 and size > gathered:
                break
            take.append(pack)
            gathered += size
        bases = [os.fsencode(pack._basename) for pack in take]
        # The merged packs are removed in this directory, held from before the merge: in the
        # workspace the agent may put a symlink in its place meanwhile, and the packs of those
        # names elsewhere (the kept record's are named the same way) are not ours to remove.
        try:
            dir_fd = os.open(
                self.root + b"/pack", os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
            )
        except OSError:
            return
        try:
            try:
                merged = small_pack.merge_packs(self.root + b"/pack", bases, durable=_any_settled(bases))
            except small_pack.DamagedPack as damaged:
                self._damaged.add(damaged.base)  # the next keep merges the others without it
                return
            except OSError:
                return
            for pack in take:  # the merged pack is in place (its index last): these go
                base = os.fsencode(pack._basename)
                if base == merged:
                    continue  # it held every object already (a kill came before these went): left as it was
                pack.close()
                for suffix in (b".idx", b".pack"):
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(os.path.basename(base) + suffix, dir_fd=dir_fd)
        finally:
            os.close(dir_fd)
        self.refresh()

    def pack_loose(self, shas: list[bytes], *, durable: bool = False) -> list[bytes]:
        """Move these loose objects into one small pack (small_pack.py) and delete their files
        and the fan-out directories that emptied, as `git gc` and `git prune-packed` do; return
        the ids left loose because they are big (STREAM_THRESHOLD or more: a pack entry is
        written whole, and the agent can `git add` a sparse file of GiBs).

        Each file is read and hashed again: one that no longer holds the object its name says
        (changed since the check that found it sound) stays, for the next check to find. At
        most PACK_BATCH_BYTES are gathered in memory; the rest waits for the next call. The
        pack is complete (its index last) before any loose file goes; with `durable` it is
        fsynced first (some of those files may have been on disk for good). The store's own
        small packs are merged as the kept record's are (consolidate()).
        """
        from crucible_world_git import small_pack

        objects: list[tuple[bytes, bytes, bytes]] = []
        big: list[bytes] = []
        gathered = 0
        for sha in shas:
            if gathered >= PACK_BATCH_BYTES:
                break
            try:
                with open_regular(self._loose_path(sha)[1]) as f:
                    pieces = inflated(f)
                    kind, size, rest = _loose_header(pieces, sha)
                    if size >= STREAM_THRESHOLD:
                        big.append(sha)
                        continue
                    body = bytearray(rest)
                    for piece in pieces:
                        body += piece
                        if len(body) > size:
                            break
            except (OSError, zlib.error):
                continue  # gone or damaged: the next check says which
            if len(body) == size and object_id(kind, bytes(body)) == sha:
                objects.append((sha, kind, bytes(body)))
                gathered += size
        if not objects:
            return big
        pack_dir = self.root + b"/pack"
        _real_directory(pack_dir)
        small_pack.write_pack(pack_dir, len(objects), objects, durable=durable)
        emptied: set[bytes] = set()
        for sha, _, _ in objects:
            directory, path = self._loose_path(sha)
            # Through the directory itself, never a link in its place: the agent may have swapped
            # one in since the read, and the file of that name elsewhere is not ours to remove.
            try:
                dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
            except OSError:
                continue  # gone, or no longer a directory: the next check looks at it
            try:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path[len(directory) + 1 :], dir_fd=dir_fd)
            finally:
                os.close(dir_fd)
            emptied.add(directory)
        self._retire_dirs(emptied)
        self.refresh()  # forgets the fan-out directories made (some are gone now)
        self.consolidate()
        return big

    def _spare_container(self, *, make: bool) -> int | None:
        """SPARE_DIRS opened without following a link (made first when `make`), or None."""
        path = os.path.dirname(self.root) + b"/" + SPARE_DIRS
        try:
            return os.open(path, _DIRECTORY)
        except FileNotFoundError:
            if not make:
                return None
        except OSError:
            return None  # a link or a file in its place: no spares, mkdir and rmdir as git does
        try:
            os.mkdir(path, 0o755)
            return os.open(path, _DIRECTORY)
        except OSError:
            return None

    def _spares(self, container: int) -> list[bytes]:
        if self._spare_dirs is None:
            # Left by an earlier process too (a resume): only names as _retire_dirs gives them.
            # (os.listdir gives a descriptor's names as str.)
            names = (os.fsencode(name) for name in os.listdir(container))
            self._spare_dirs = [name for name in names if name.startswith(_SPARE_PREFIX)]
        return self._spare_dirs

    def _retire_dirs(self, emptied: Iterable[bytes]) -> None:
        """Move the fan-out directories packing emptied out of objects/ into SPARE_DIRS, or remove
        them when that cannot be done or enough wait there; one that is not empty stays."""
        container = self._spare_container(make=True)
        try:
            spares = self._spares(container) if container is not None else []
            for directory in emptied:
                if container is None or len(spares) >= MAX_SPARE_DIRS:
                    with contextlib.suppress(OSError):  # not empty: left as it is
                        os.rmdir(directory)
                    continue
                name = _SPARE_PREFIX + os.urandom(8).hex().encode()
                try:
                    # Never a link (it would be moved, not followed, but is no spare), never one
                    # that still holds something: a file left there would land in another fan-out.
                    if not stat.S_ISDIR(os.lstat(directory).st_mode) or os.listdir(directory):
                        continue
                    os.rename(directory, name, dst_dir_fd=container)
                except OSError:
                    continue
                spares.append(name)
        finally:
            if container is not None:
                os.close(container)

    def _take_spare_dir(self, directory: bytes) -> bool:
        """Rename a spare fan-out directory into place as `directory` (missing); False when none
        could be. What stands in SPARE_DIRS is the agent's to change: only an empty real directory is
        taken, and the caller checks what stands at `directory` afterwards."""
        if self._spare_dirs is not None and not self._spare_dirs:
            return False
        container = self._spare_container(make=False)
        if container is None:
            self._spare_dirs = []
            return False
        try:
            spares = self._spares(container)
            while spares:
                name = spares.pop()
                # Only an empty real directory: what the agent put into one would land in
                # objects/ by our own rename, after the object check looked, as if we wrote it.
                try:
                    inner = os.open(name, _DIRECTORY, dir_fd=container)
                except OSError:
                    continue  # gone, or a link or file in its place
                try:
                    # ...and one we may write into (a read-only one would refuse our objects).
                    st = os.fstat(inner)
                    if st.st_uid != os.geteuid() or st.st_mode & 0o700 != 0o700 or os.listdir(inner):
                        continue
                except OSError:
                    continue
                finally:
                    os.close(inner)
                try:
                    os.rename(name, directory, src_dir_fd=container)
                except FileNotFoundError:
                    continue  # gone since
                except OSError:
                    spares.append(name)  # something stands at `directory` now: the caller sees it
                    return False
                return True
            return False
        finally:
            os.close(container)

    def _add_pack(self, count: int, objects: Iterator[tuple[bytes, bytes, bytes]]) -> None:
        from dulwich.pack import UnpackedObject

        self.store.add_pack_data(
            count,
            (
                UnpackedObject(_TYPE_NUMBERS[kind], decomp_chunks=[body], sha=sha)
                for sha, kind, body in objects
            ),
        )
        self.refresh()

    def read(self, sha: bytes) -> tuple[bytes, bytes]:
        """(kind, body) of an object; loose ones are read here, packed ones through dulwich."""
        if self._batch is not None and (waiting := self._batch.get(sha)) is not None:
            return waiting
        if (known := self._recent.get(sha)) is not None:
            return known
        _, path = self._loose_path(sha)
        try:
            with open_regular(path) as f:
                raw = zlib.decompress(f.read())
        except FileNotFoundError:
            try:
                type_num, body = self.store.get_raw(dulwich_names.object_id(sha.hex().encode()))
            except KeyError:
                raise RunFailed(
                    f"object {sha.hex()} is missing from the workspace repository",
                    hint="the repository is damaged; re-create the workspace",
                ) from None
            return _TYPE_NAMES[type_num], body
        nul = raw.index(b"\0")
        kind = raw[: raw.index(b" ")]
        return kind, raw[nul + 1 :]


def _in_packs(packs: list[Pack], sha: bytes) -> bool:
    """Whether one of these packs holds object `sha` (raw id).

    A pack whose index counts no object starting with the id's first byte is passed over on its
    fan-out table alone: the engine's small packs hold a handful of objects each, and dulwich's
    own lookup raises and catches a KeyError for every pack that lacks the object.
    """
    raw = dulwich_names.raw_object_id(sha)
    first = sha[0]
    for pack in packs:
        fan_out = getattr(pack.index, "_fan_out_table", None)
        if fan_out is not None and fan_out[first] == (fan_out[first - 1] if first else 0):
            continue
        if raw in pack:
            return True
    return False


def _real_directory(directory: bytes, spare: Callable[[bytes], bool] | None = None) -> None:
    """Make `directory` exist as a real directory: a symlink or file in its place is removed, never
    followed. A missing one is what `spare(directory)` renames into place, if it can, else made."""
    try:
        st = os.lstat(directory)
    except FileNotFoundError:
        if spare is not None and spare(directory):
            _real_directory(directory)  # what the rename put there (or someone else since) is checked
            return
        try:
            os.mkdir(directory)  # the objects directory is there: one mkdir, not makedirs' walk up
            return
        except FileNotFoundError:
            os.makedirs(directory, exist_ok=True)
            return
        except FileExistsError:
            st = os.lstat(directory)  # made meanwhile, by someone else: as what is checked below
    if not stat.S_ISDIR(st.st_mode):
        os.unlink(directory)
        os.mkdir(directory)


def write_all(fd: int, data: bytes) -> None:
    """os.write until all of `data` is written (a write may take less than it was given)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _any_settled(bases: list[bytes]) -> bool:
    """Whether any of these packs was written more than SETTLED_NS ago: the kernel may have put
    it on disk for good since, and a merge that removes it must not leave less durable bytes in
    its place. Younger ones are no more durable than the pack merged from them, so removing them
    risks nothing that was safe, and a merge of young packs only (a quick run's) is not fsynced."""
    settled = time.time_ns() - SETTLED_NS
    for base in bases:
        try:
            if os.stat(base + b".pack").st_mtime_ns < settled:
                return True
        except OSError:
            return True
    return False


def place_new_file(
    fd: int, tmp: bytes, final: bytes, parts: Iterable[bytes], *, durable: bool = False
) -> None:
    """Write `parts` into the fresh temporary file `tmp` (open as `fd`, closed here), then rename
    it to `final`; whatever fails on the way, the temporary file is removed. With `durable`, the
    file is fsynced before the rename (the directory is the caller's to fsync)."""
    try:
        for part in parts:
            write_all(fd, part)
        if durable:
            os.fsync(fd)
    except BaseException:
        os.close(fd)
        os.unlink(tmp)
        raise
    os.close(fd)
    os.replace(tmp, final)


def inflated(f: BinaryIO) -> Iterator[bytes]:
    """The inflated content of a zlib stream, in pieces of at most 1 MiB however well it
    compresses (a few KiB of it can inflate to GiBs); zlib.error when the stream is cut short
    or anything follows it."""
    inflate = zlib.decompressobj()
    yield from _inflate(f, inflate)
    if not inflate.eof or inflate.unused_data or f.read(1):
        raise zlib.error("not one whole zlib stream")


def _inflate(f: BinaryIO, inflate: zlib._Decompress) -> Iterator[bytes]:
    """Feed `f` to `inflate` until its stream ends, yielding pieces of at most _CHUNK."""
    while not inflate.eof and (chunk := f.read(_CHUNK)):
        while not inflate.eof:
            piece = inflate.decompress(chunk, _CHUNK)
            chunk = inflate.unconsumed_tail
            if piece:
                yield piece
            elif not chunk:
                break  # wants more input


def _loose_header(pieces: Iterator[bytes], sha: bytes) -> tuple[bytes, int, bytes]:
    """(kind, size, the body's first bytes) of a loose object, taking its first pieces."""
    head = b""
    for piece in pieces:
        head += piece
        if b"\0" in head or len(head) >= 64:
            break
    header, nul, rest = head.partition(b"\0")
    kind, _, size_text = header.partition(b" ")
    if not nul or kind not in _TYPE_NUMBERS or not size_text.isdigit() or len(size_text) > 20:
        raise zlib.error(f"object {sha.hex()} has no valid header")
    return kind, int(size_text), rest


def _pack_entry_header(f: BinaryIO) -> tuple[int, int]:
    """(type number, inflated size) from the header of a pack entry, read at its offset."""
    first = f.read(1)
    if not first:
        raise zlib.error("a pack entry past the end of its pack")
    byte = first[0]
    type_num, size, shift = (byte >> 4) & 7, byte & 15, 4
    while byte & 0x80:
        more = f.read(1)
        if not more or shift > 70:
            raise zlib.error("a malformed pack entry header")
        byte = more[0]
        size |= (byte & 0x7F) << shift
        shift += 7
    return type_num, size


def _inflated_entry(f: BinaryIO) -> Iterator[bytes]:
    """The inflated data of one pack entry, from its zlib stream on (what follows it is the
    next entry), in pieces of at most 1 MiB; zlib.error when the stream is cut short."""
    inflate = zlib.decompressobj()
    yield from _inflate(f, inflate)
    if not inflate.eof:
        raise zlib.error("a pack entry cut short")


def _chunks(path: bytes) -> Iterator[bytes]:
    with open_regular(path) as f:
        while chunk := f.read(_CHUNK):
            yield chunk


def parse_tree(body: bytes) -> Iterator[tuple[bytes, int, bytes]]:
    """(name, mode, raw id) for each entry of a tree object's body."""
    pos = 0
    end = len(body)
    while pos < end:
        space = body.index(b" ", pos)
        nul = body.index(b"\0", space)
        yield body[space + 1 : nul], int(body[pos:space], 8), body[nul + 1 : nul + 21]
        pos = nul + 21


def commit_tree_id(body: bytes) -> bytes:
    """The root tree id of a commit object's body."""
    if not body.startswith(b"tree "):
        raise RunFailed("a commit object without a tree line", hint="the repository is damaged")
    return bytes.fromhex(body[5:45].decode("ascii"))
